#!/usr/bin/env bash
# The simulator validated against the CPU engine, end to end: profile three dense model
# shapes and a mixture of experts on the engine, together; fit one cost model to the three
# dense shapes, then validate it at three loads on one of them and on a third shape the fit
# never saw; then the mixture of experts, fitted with the dense ones and validated the
# same way; each load's engine runs twice, so validation.md says
# how far the engine alone moves between runs. A load whose host drifted (a reference
# step by more than 5% across the run) or whose decode errors wandered (stretches' means
# more than 25 points apart; quiet runs here spanned 11-17, runs the host slowed in
# their middle 43-46) runs once more. About 15-20 minutes on 2 cores (less without the
# re-runs).
#
#   bash experiments/validation/run.sh        (after the build: scripts/run.sh builds)
#
# Writes results/validation/: profile_{a,b,c,moe}.csv, cpu_model/
# and moe_model/ (MODEL.yaml, calibration.json, calibration.png), cpu_profiled_a/,
# cpu_unseen_shape/ and cpu_moe/ (each validation.md, validation.csv, validation_cdf.png
# and per load the engine's and the simulator's result folders).
set -euo pipefail
cd "$(dirname "$0")/../.."
servelab=${SERVELAB:-./build/servelab}
out=results/validation
mkdir -p "$out"
# The four shapes profiled together, in shared passes: the host's speed that hour is in
# every file alike (profiled one after another, 15 minutes apart, two dense shapes fitted
# in sample at whole-step bias +5.1% and -9.5%; together, +0.2% and +0.8%). Three dense
# shapes, so the GEMMs see three weight sizes and the KV heads bracket the unseen shape's
# (a and b alone: the unseen shape's qkv_proj predicted 15% fast, rope 28% slow).
# A profile whose whole steps moved by a median above MAX_SPREAD percent within their
# rows, once the host's drift is taken out (profile --drift-window; 2026-12-05: 3.8-8.1%,
# in hours when they spread 12-32% with it), stops the loop there, 7 minutes in instead
# of 20, since a fit of it carries the host: MAX_SPREAD=1000 goes on regardless.
"$servelab" profile experiments/validation/cpu_profiled_a.yaml experiments/validation/cpu_profiled_b.yaml \
  experiments/validation/cpu_profiled_c.yaml experiments/validation/cpu_moe.yaml --repeats 15 \
  --max-spread "${MAX_SPREAD:-15}" \
  --out "$out/profile_a.csv" --out "$out/profile_b.csv" --out "$out/profile_c.csv" --out "$out/profile_moe.csv"
dense=("$out/profile_a.csv" "$out/profile_b.csv" "$out/profile_c.csv")
"$servelab" calibrate "${dense[@]}" --out "$out/cpu_model/MODEL.yaml"
for experiment in cpu_profiled_a cpu_unseen_shape; do
  "$servelab" validate "experiments/validation/$experiment.yaml" \
    --cost-model "$out/cpu_model/MODEL.yaml" --retries 1 --max-wander 25 --engine-runs 2 --out "$out/$experiment"
done
# A mixture of experts: its own profile (its MLP as one op, moe_mlp) fitted with the
# dense ones (four weight sizes for the attention GEMMs and the LM head).
"$servelab" calibrate "${dense[@]}" "$out/profile_moe.csv" \
  --out "$out/moe_model/MODEL.yaml"
"$servelab" validate experiments/validation/cpu_moe.yaml --cost-model "$out/moe_model/MODEL.yaml" --retries 1 --max-wander 25 --engine-runs 2 \
  --out "$out/cpu_moe"
