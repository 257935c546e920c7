#!/usr/bin/env bash
# Builds servelab and its tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (-fno-sanitize-recover: the first report fails) in build-asan/, then runs the whole CPU
# test suite and every shipped experiment that needs no GPU (`run`; `sweep` for a file
# with a sweep block, `plan` for one with a plan block) under them. Exits non-zero on the first failure or report.
#   scripts/sanitize.sh            build, suite, experiments
#   scripts/sanitize.sh --no-tests build, experiments only
# Too slow for CI on two cores (see the README for its time); run it before a release
# and after changing anything that indexes memory.
set -euo pipefail
cd "$(dirname "$0")/.."
run_tests=1
if [ "${1:-}" = "--no-tests" ]; then run_tests=0; elif [ $# -gt 0 ]; then
  echo "usage: scripts/sanitize.sh [--no-tests]" >&2
  exit 2
fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-asan "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSERVELAB_CUDA=OFF -DSERVELAB_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-asan --parallel "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if [ "$run_tests" = 1 ]; then
  # Open MPI leaks in its own libraries and plugins (reports with no servelab frame): its
  # tests run with LeakSanitizer off, every other check on.
  (cd build-asan && ctest --output-on-failure --parallel "$(nproc)" --timeout 1800 -E '^MpiTest\.')
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 \
     ctest --output-on-failure --timeout 1800 -R '^MpiTest\.')
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# experiments/results/ holds what runs wrote (fitted MODEL.yaml files, resolved configs),
# not experiments to run.
for yaml in $(find experiments -name '*.yaml' -not -path 'experiments/results/*' | sort); do
  if grep -q 'device: cuda' "$yaml"; then continue; fi
  verb=run
  if grep -q '^sweep:' "$yaml"; then verb=sweep; fi
  if grep -q '^plan:' "$yaml"; then verb="plan --no-plots"; fi
  name=$(echo "$yaml" | tr '/' '_')
  start=$(date +%s)
  if ! build-asan/servelab $verb "$yaml" --out "$out/$name" --no-progress >"$out/$name.log" 2>&1; then
    cat "$out/$name.log" >&2
    echo "sanitize: $verb $yaml failed" >&2
    exit 1
  fi
  echo "sanitize: $verb $yaml ok ($(( $(date +%s) - start )) s)"
done
echo "sanitize: no sanitizer report"
