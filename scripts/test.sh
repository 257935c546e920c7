#!/usr/bin/env bash
# Builds everything and runs every test (C++ GoogleTest suites and the plot scripts'
# tests) through CTest, then every fuzzer on its seed corpus and 2,000 seeded mutations
# (scripts/fuzz.sh: a clang ASan + UBSan build in build-fuzz/), so they cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 900
cd ..
bash scripts/fuzz.sh --runs 2000
