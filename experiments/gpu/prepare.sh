#!/usr/bin/env bash
# Fills <repo>/.gpu_deps (git-ignored) with what the device machine's image lacks, for
# check.sh: header-only libraries and GoogleTest sources for the GPU build, and, from a
# CUDA build in ./build (sm_90 SASS + PTX; brought up to date here), the CUDA test and
# benchmark binaries (prebuilt/, so the device spends no time compiling) and the CLI with
# the two shared libraries it needs beyond CUDA's (bin/, lib/), so check.sh can run
# experiments/engine_cuda.yaml on the engine and on the simulator. Then carry `.gpu_deps`
# with the device run (about 40 MB of the 64 MiB a run may carry).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS=$ROOT/.gpu_deps
rm -rf "$DEPS"
mkdir -p "$DEPS/include" "$DEPS/bin" "$DEPS/lib"
cp -r /usr/include/nlohmann /usr/include/eigen3 "$DEPS/include/"
cp -r /usr/src/googletest "$DEPS/googletest"
grep -qx '/.gpu_deps/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.gpu_deps/' >>"$ROOT/.git/info/exclude"
BINARIES=(tests/kernels_cuda_kernels_test tests/kernels_cuda_sampling_test
          tests/engine_cuda_runner_kernels_test tests/engine_cuda_model_runner_test
          bench/cuda_kernels_benchmark bench/cuda_engine_benchmark)
if grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$ROOT/build/CMakeCache.txt" 2>/dev/null; then
  # Current binaries: build them now (an up-to-date build does nothing).
  cmake --build "$ROOT/build" -j "$(nproc)" --target servelab $(for b in "${BINARIES[@]}"; do basename "$b"; done)
  mkdir -p "$DEPS/prebuilt"
  for b in "${BINARIES[@]}"; do cp "$ROOT/build/$b" "$DEPS/prebuilt/"; done
  dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no | wc -l)
  echo "built $(date -u +%FT%TZ) from $(git -C "$ROOT" rev-parse --short HEAD), $dirty files modified" \
    >"$DEPS/prebuilt/STAMP"
  # The hash check.sh recomputes there: binaries older than the sources get a warning.
  bash "$ROOT/experiments/gpu/sources_hash.sh" >"$DEPS/prebuilt/SOURCES"
fi
LIBS=$( [[ -x $ROOT/build/servelab ]] && ldd "$ROOT/build/servelab" || true)
if [[ $LIBS == *libcudart* ]]; then
  cp "$ROOT/build/servelab" "$DEPS/bin/"
  # Every library the CLI loads beyond the C and C++ runtimes, which the device image has
  # in versions at least as new: yaml-cpp, Boost, Open MPI's (loaded, initialised only
  # under mpirun), and CUDA's runtime, so the binaries find the one they were built with
  # whatever the image's loader path holds. cuBLAS is opened at run time from the image.
  for lib in $(awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so/ {print $3}' <<<"$LIBS"); do
    cp -L "$lib" "$DEPS/lib/"
  done
fi
du -sh "$DEPS"
