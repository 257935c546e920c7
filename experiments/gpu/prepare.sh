#!/usr/bin/env bash
# Fills <repo>/.gpu_deps (git-ignored) with what the device machine's image lacks, for
# check.sh: header-only libraries and GoogleTest sources for the GPU build, plus, when
# ./build/servelab exists (a CUDA build from here, sm_90 SASS + PTX), the CLI and the two
# shared libraries it needs beyond CUDA's, so check.sh can run experiments/engine_cuda.yaml
# on the engine and on the simulator. Then carry `.gpu_deps` with the device run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS=$ROOT/.gpu_deps
rm -rf "$DEPS"
mkdir -p "$DEPS/include" "$DEPS/bin" "$DEPS/lib"
cp -r /usr/include/nlohmann /usr/include/eigen3 "$DEPS/include/"
cp -r /usr/src/googletest "$DEPS/googletest"
grep -qx '/.gpu_deps/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.gpu_deps/' >>"$ROOT/.git/info/exclude"
LIBS=$( [[ -x $ROOT/build/servelab ]] && ldd "$ROOT/build/servelab" || true)
if [[ $LIBS == *libcudart* ]]; then
  cp "$ROOT/build/servelab" "$DEPS/bin/"
  for lib in $(awk '/yaml-cpp|boost_program_options/ {print $3}' <<<"$LIBS"); do
    cp -L "$lib" "$DEPS/lib/"
  done
fi
du -sh "$DEPS"
