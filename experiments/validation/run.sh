#!/usr/bin/env bash
# The simulator validated against the CPU engine, end to end: profile two model shapes
# on the engine, fit one cost model to both, then validate it at three loads on one of
# them and on a third shape the fit never saw. About 4 minutes on 2 cores.
#
#   bash experiments/validation/run.sh        (after the build: scripts/run.sh builds)
#
# Writes results/validation/: profile_a.csv, profile_b.csv, cpu_model/ (MODEL.yaml,
# calibration.json, calibration.png), cpu_profiled_a/ and cpu_unseen_shape/ (each
# validation.md, validation.csv, validation_cdf.png and per load the engine's and the
# simulator's result folders).
set -euo pipefail
cd "$(dirname "$0")/../.."
servelab=${SERVELAB:-./build/servelab}
out=results/validation
mkdir -p "$out"
"$servelab" profile experiments/validation/cpu_profiled_a.yaml --out "$out/profile_a.csv"
"$servelab" profile experiments/validation/cpu_profiled_b.yaml --out "$out/profile_b.csv"
"$servelab" calibrate "$out/profile_a.csv" "$out/profile_b.csv" --out "$out/cpu_model/MODEL.yaml"
for experiment in cpu_profiled_a cpu_unseen_shape; do
  "$servelab" validate "experiments/validation/$experiment.yaml" \
    --cost-model "$out/cpu_model/MODEL.yaml" --out "$out/$experiment"
done
