#!/usr/bin/env bash
# The cost model fitted to Vidur's published A100 and H100 profiles (../shared/data/
# profiles/), each fit judged in sample, on rows it held out and on profiles it never saw:
# the commands behind the repository README's calibration table, and the table itself.
# About 30 seconds on 2 cores; no GPU.
#
#   bash experiments/calibration/run.sh        (after the build: scripts/run.sh builds)
#
# Writes results/calibration/<fit>/ (MODEL.yaml, calibration.json, calibration.png) and
# results/calibration/summary.md, the table (summary.py reads the calibration.json files);
# OUT_DIR=DIR writes there instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
servelab=${SERVELAB:-./build/servelab}
profiles=${PROFILES:-../shared/data/profiles}
out=${OUT_DIR:-results/calibration}
a100_7b=$profiles/vidur_a100_Llama-2-7b-hf_mlp.csv
a100_8b=$profiles/vidur_a100_Meta-Llama-3-8B_mlp.csv
h100_7b=$profiles/vidur_h100_Llama-2-7b-hf_mlp.csv
attention=$profiles/vidur_a100_Llama-2-70b-hf_tp2_attention_upto2k.csv
for f in "$a100_7b" "$a100_8b" "$h100_7b" "$attention"; do
  [[ -f $f ]] || { echo "run.sh: $f: no such profile (set PROFILES to their folder)" >&2; exit 2; }
done
fit() {  # fit NAME PROFILE [calibrate's options...]
  local name=$1 profile=$2
  shift 2
  echo "== $name" >&2
  "$servelab" calibrate "$profile" --out "$out/$name/MODEL.yaml" "$@" > "$out/$name.log"
}
mkdir -p "$out"
# In sample, and carried to another model shape (GQA, a wider MLP) and another GPU.
fit a100_7b "$a100_7b" --evaluate "$a100_8b" --evaluate "$h100_7b"
fit h100_7b "$h100_7b" --evaluate "$a100_7b"
fit a100_8b "$a100_8b"
# Longer steps than any the fit saw.
fit a100_7b_short "$a100_7b" --hold-out 'tokens>2048'
# Attention, Llama-2-70B at TP 2: in sample, and contexts longer than any the fit saw.
fit attention "$attention"
fit attention_short "$attention" --hold-out 'context>1024'
/usr/bin/python3 experiments/calibration/summary.py "$out" > "$out/summary.md"
cat "$out/summary.md"
