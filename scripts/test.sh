#!/usr/bin/env bash
# Builds everything and runs every test (C++ GoogleTest suites and the plot scripts'
# tests) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 900
