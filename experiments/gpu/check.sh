#!/usr/bin/env bash
# Device check for the CUDA kernels (issue 5), one call on the H200 machine, ~8 minutes max:
#   1. configure + build in Release for sm_90 (the whole project; if its host libraries are
#      missing there, the kernels-only project beside this script),
#   2. run the CUDA kernel tests (each kernel against its CPU twin),
#   3. run the decode-attention benchmark (GB/s against a device-to-device copy).
# Everything goes to $OUT (logs, test XML, benchmark CSV, summary.txt); the short table is
# printed last. Exits non-zero if the build or any test fails, after writing what it has.
# GoogleTest for the fallback: installed, or sources at $SERVELAB_GTEST_SOURCE or
# <repo>/.gpu_deps/googletest (carry that path; copy it from /usr/src/googletest here).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/build-gpu-out}
BUILD=${BUILD:-/tmp/servelab-gpu-build}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
status=0
note() { echo "[check] $*" | tee -a "$SUMMARY"; }
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

{ nvidia-smi; nvcc --version; cmake --version; } >"$OUT/environment.txt" 2>&1
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

SECONDS=0
TEST_BIN=$BUILD/full/tests/kernels_cuda_kernels_test
BENCH_BIN=$BUILD/full/bench/cuda_kernels_benchmark
if timeout 120 cmake -S "$ROOT" -B "$BUILD/full" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DSERVELAB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/configure.log" 2>&1; then
  note "configured the whole project"
  timeout 360 cmake --build "$BUILD/full" -j "$JOBS" --target kernels_cuda_kernels_test \
      cuda_kernels_benchmark >"$OUT/build.log" 2>&1 || { note "BUILD FAILED (build.log)"; status=1; }
else
  note "whole project did not configure here (configure.log); kernels-only build"
  GTEST_SRC=${SERVELAB_GTEST_SOURCE:-$ROOT/.gpu_deps/googletest}
  TEST_BIN=$BUILD/kernels/kernels_cuda_kernels_test
  BENCH_BIN=$BUILD/kernels/cuda_kernels_benchmark
  if timeout 120 cmake -S "$ROOT/experiments/gpu" -B "$BUILD/kernels" "${GEN[@]}" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DSERVELAB_GTEST_SOURCE="$GTEST_SRC" >>"$OUT/configure.log" 2>&1; then
    timeout 360 cmake --build "$BUILD/kernels" -j "$JOBS" >"$OUT/build.log" 2>&1 ||
      { note "BUILD FAILED (build.log)"; status=1; }
  else
    note "CONFIGURE FAILED (configure.log)"; status=1
  fi
fi
note "build: ${SECONDS}s"

if [[ -x $TEST_BIN ]]; then
  SECONDS=0
  timeout 180 "$TEST_BIN" --gtest_output=xml:"$OUT/cuda_kernels_test.xml" >"$OUT/tests.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$OUT/tests.log")
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$OUT/tests.log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$OUT/tests.log")
  note "tests: rc $rc, $passed passed, $failed failed lines, $skipped skipped, ${SECONDS}s"
  if [[ $rc -ne 0 ]]; then
    status=1
    grep -E 'FAILED|Failure|CHECK failed|error' "$OUT/tests.log" | head -20 | tee -a "$SUMMARY"
  fi
  [[ $skipped -gt 0 ]] && { note "TESTS SKIPPED on the device machine"; status=1; }
else
  note "NO TEST BINARY"; status=1
fi

if [[ -x $BENCH_BIN ]]; then
  SECONDS=0
  timeout 150 "$BENCH_BIN" "$OUT/decode_attention.csv" >"$OUT/benchmark.log" 2>&1 ||
    { note "BENCHMARK FAILED (benchmark.log)"; status=1; }
  note "benchmark: ${SECONDS}s"
  cat "$OUT/benchmark.log" >>"$SUMMARY"
else
  note "NO BENCHMARK BINARY"; status=1
fi

note "status: $([[ $status -eq 0 ]] && echo PASS || echo FAIL)"
echo; cat "$SUMMARY"
exit $status
