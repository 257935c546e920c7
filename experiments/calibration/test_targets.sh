#!/usr/bin/env bash
# The calibration targets on Vidur's published profiles, as a test: run.sh's fits into a
# temporary folder, and every row of its table that has a target meets it (per-layer
# MAPE <= 3% at every TP in sample on three profiles, <= 8% from Llama-2-7B to
# Llama-3-8B, attention decode and prefill each <= 5%). Exit 77 (skipped) without the
# profiles.
#
#   test_targets.sh SERVELAB_BINARY
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
profiles=${PROFILES:-$root/../shared/data/profiles}
if [[ ! -f $profiles/vidur_a100_Llama-2-7b-hf_mlp.csv ]]; then
  echo "skipped: Vidur's profiles are not at $profiles (set PROFILES)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SERVELAB=$1 PROFILES=$profiles OUT_DIR=$tmp bash "$root/experiments/calibration/run.sh" > "$tmp/table.md" 2> "$tmp/log"
cat "$tmp/table.md"
met=$(grep -c ': met |' "$tmp/table.md" || true)
if grep -q 'missed' "$tmp/table.md" || [[ $met -ne 5 ]]; then
  echo "FAILED: $met of 5 targets met" >&2
  exit 1
fi
echo "all 5 targets met"
