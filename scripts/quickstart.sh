#!/usr/bin/env bash
# From a fresh Debian 12 machine: set up, build, run the quickstart experiment (a simulated
# Llama-2-7B on one A100, a minute of Poisson traffic) and draw its plots.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/servelab run experiments/quickstart.yaml "$@"
/usr/bin/python3 plots/all.py results/quickstart
