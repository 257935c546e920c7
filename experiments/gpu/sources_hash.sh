#!/usr/bin/env bash
# The hash of the sources the CUDA test binaries and the CLI are built from, printed: what
# prepare.sh records beside the binaries it builds here and check.sh recomputes on the
# device machine, so binaries older than the sources carried with them are flagged.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
find cli core driver engine kernels policies sim tests bench -type f \
  \( -name '*.cc' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' -o -name CMakeLists.txt \) \
  -print0 | LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -c1-16
