#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang, ASan and UBSan in build-fuzz/, then
# runs each one on a copy of its seed corpus (fuzz/corpus/NAME/):
#   scripts/fuzz.sh SECONDS     each harness for SECONDS seconds (e.g. 3600)
#   scripts/fuzz.sh --runs N    each harness for N inputs, the corpus then seeded mutations:
#                               the same inputs every time (CI runs this)
# Exits 1 on the first finding (a crash, a sanitizer report, a broken contract, a leak,
# a timeout); the input that found it is left in build-fuzz/findings/NAME/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 2 ] && [ "$1" = "--runs" ]; then
  limit=(-runs="$2" -seed=1)  # a fixed seed: the same inputs every time (CI)
elif [ $# -eq 1 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  limit=(-max_total_time="$1")
else
  echo "usage: scripts/fuzz.sh SECONDS | --runs N" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is missing; install Debian's clang: apt-get install -y clang libclang-rt-14-dev" >&2
  exit 2
fi
probe=$(mktemp -d)
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  > "$probe/probe.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2>/dev/null; then
  rm -rf "$probe"
  echo "fuzz: clang cannot link libFuzzer with ASan/UBSan; install their runtime: apt-get install -y libclang-rt-14-dev" >&2
  exit 2
fi
rm -rf "$probe"
mkdir -p build-fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSERVELAB_FUZZ=ON -DSERVELAB_CUDA=OFF -DSERVELAB_BUILD_TESTS=OFF -DSERVELAB_BUILD_BENCH=OFF \
  >build-fuzz/configure.log 2>&1 || { cat build-fuzz/configure.log >&2; echo "fuzz: configuring failed" >&2; exit 1; }
# The harnesses only: a servelab CLI built here would carry ASan and UBSan (30 s for a
# calibrate that takes 6), and a `build*/servelab` glob finds build-fuzz's first.
targets=()
for source in fuzz/*_fuzzer.cc; do targets+=(--target "$(basename "$source" .cc)"); done
rm -f build-fuzz/servelab
# The build's own output only when it fails (ninja prints compile errors on stdout).
if ! cmake --build build-fuzz --parallel "$(nproc)" "${targets[@]}" >build-fuzz/build.log 2>&1; then
  grep -E -A8 'error' build-fuzz/build.log | head -60 >&2
  echo "fuzz: building the fuzzers with clang failed (build-fuzz/build.log)" >&2
  exit 1
fi
status=0
for source in fuzz/*_fuzzer.cc; do
  name=$(basename "$source" .cc)
  corpus=build-fuzz/corpus/$name
  findings=build-fuzz/findings/$name
  rm -rf "$corpus" "$findings"
  mkdir -p "$corpus" "$findings"
  cp fuzz/corpus/"${name%_fuzzer}"/* "$corpus"/ 2>/dev/null || true
  log=build-fuzz/$name.log
  if ./build-fuzz/fuzz/"$name" "$corpus" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
       -max_len=65536 -artifact_prefix="$findings"/ -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz: $name: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') inputs," \
         "$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}')/s, no finding"
  else
    echo "fuzz: $name: FINDING (see $log and $findings/)" >&2
    tail -30 "$log" >&2
    status=1
  fi
done
exit $status
