#!/usr/bin/python3
"""Measured (engine) against predicted (simulator) latency CDFs, per load.

usage: validation.py DIR LOAD... [--out PNG]
DIR is a `servelab validate` folder; each LOAD is one of its load folders, holding
engine/ and sim/ result folders of the same requests (and, with `--engine-runs`, the
engine's further runs in run-K/engine/). One row per load, one column per metric (TTFT,
TPOT, E2E): the engine's CDF and the simulator's overlaid, each further engine run's
beside them (how far the engine moves from run to run), the panel title carrying the
simulator's p50 and p99 errors against the first run, and a last column of each step's
predicted against measured time (steps_compared.csv). Writes PNG (default
DIR/validation_cdf.png).
"""
import argparse
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["client", "status", "ttft_s", "tpot_s", "e2e_s"]
METRICS = [("ttft_s", "TTFT", "s", 1.0), ("tpot_s", "TPOT", "ms", 1e3),
           ("e2e_s", "E2E latency", "s", 1.0)]
ENGINE, SIM = "tab:blue", "tab:orange"
# The engine's further runs (validate --engine-runs: up to 9 of them), each its own colour.
RERUNS = ["tab:cyan", "tab:olive", "tab:pink", "tab:brown", "tab:gray", "tab:purple",
          "tab:green", "tab:red", "navy"]


def reruns(directory, load):
    """The load's further engine runs (`servelab validate --engine-runs`): [(K, dir)] by K."""
    base = os.path.join(directory, load)
    found = []
    for name in os.listdir(base):
        m = re.fullmatch(r"run-([0-9]+)", name)
        if m and os.path.isdir(os.path.join(base, name)):
            found.append((int(m.group(1)), os.path.join(base, name, "engine")))
    return sorted(found)


def error_note(measured, predicted):
    if len(measured) == 0 or len(predicted) == 0:
        return ""
    parts = []
    for q in (50, 99):
        m, p = np.percentile(measured, q), np.percentile(predicted, q)
        parts.append(f"p{q} {100 * (p - m) / m:+.1f}%" if m > 0 else f"p{q} -")
    return "sim " + ", ".join(parts)


def steps_panel(ax, path, load):
    ax.set_title(f"{load}: step time, predicted vs measured")
    if not os.path.isfile(path):
        sp.no_data(ax, "no steps_compared.csv")
        return
    steps = sp.read_csv_checked(path, {"tokens": "float64", "seqs": "float64",
                                       "decode_only": "float64", "measured_ms": "float64",
                                       "predicted_ms": "float64"},
                                ["decode_only", "measured_ms", "predicted_ms"])
    if steps.empty:
        sp.no_data(ax)
        return
    for decode, color, label in ((1, "tab:green", "decode only"), (0, "tab:purple", "mixed")):
        s = steps[steps["decode_only"] == decode]
        if len(s):
            ax.scatter(s["measured_ms"], s["predicted_ms"], s=4, alpha=0.4, color=color,
                       label=f"{label} (n={len(s)})")
    lo = max(min(steps["measured_ms"].min(), steps["predicted_ms"].min()), 1e-3)
    hi = max(steps["measured_ms"].max(), steps["predicted_ms"].max())
    ax.plot([lo, hi], [lo, hi], color="0.4", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def draw(directory, loads, out):
    if not loads:
        raise sp.InputError("no LOAD given")
    fig, axes = plt.subplots(len(loads), len(METRICS) + 1,
                             figsize=(5 * (len(METRICS) + 1), 3.8 * len(loads)), squeeze=False)
    for row, load in zip(axes, loads):
        engine_dir = os.path.join(directory, load, "engine")
        sim_dir = os.path.join(directory, load, "sim")
        for d in (engine_dir, sim_dir):
            sp.check_result_dir(d)
        engine = sp.finished(sp.load_requests(engine_dir, REQUIRED))
        sim = sp.finished(sp.load_requests(sim_dir, REQUIRED))
        again = []
        for i, (k, d) in enumerate(reruns(directory, load)):
            sp.check_result_dir(d)
            again.append((f"engine, run {k}", sp.finished(sp.load_requests(d, REQUIRED)),
                          RERUNS[i % len(RERUNS)]))
        for ax, (col, label, unit, scale) in zip(row, METRICS):
            e = engine[col].to_numpy(dtype="float64") * scale
            s = sim[col].to_numpy(dtype="float64") * scale
            series = [("engine (measured)", e, ENGINE)]
            series += [(name, r[col].to_numpy(dtype="float64") * scale, color)
                       for name, r, color in again]
            sp.plot_cdfs(ax, series + [("simulator", s, SIM)], label, unit,
                         f"{load}: {label}  {error_note(e, s)}")
        steps_panel(row[-1], os.path.join(directory, load, "steps_compared.csv"), load)
    fig.suptitle(f"{os.path.basename(os.path.normpath(directory))}: simulator vs engine",
                 fontsize=13)
    fig.tight_layout()
    path = out or os.path.join(directory, "validation_cdf.png")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=sp.DPI)
    plt.close(fig)
    return [path]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument("loads", metavar="LOAD", nargs="*")
    parser.add_argument("--out", metavar="PNG", help="output file (default DIR/validation_cdf.png)")
    args = parser.parse_intermixed_args(argv)
    return draw(args.directory, args.loads, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
