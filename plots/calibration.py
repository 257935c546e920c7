#!/usr/bin/python3
"""Measured against predicted op times of a calibration, per op, against tokens.

usage: calibration.py POINTS [--out PNG] [--max-ops N]
POINTS is calibration_points.csv, written by `servelab calibrate` beside MODEL.yaml
(columns kind,file,op,tokens,batch,context,tp,measured_ms,predicted_ms, and optionally
form_ms,leave_one_out_ms; kind is "fit" for the fitted profiles and "evaluate" for
--evaluate ones). One panel per op (at most --max-ops, default 16, the ops with the most
rows): measured times as dots and the fitted form's as crosses against the op's tokens
(log-log), one colour per TP degree, fitted rows filled and evaluated rows hollow; where
a GEMM correction applies, a thin line for its predictions (leave-one-out on the fitted
rows: each from its shape's other rows). The panel title carries the op's MAPE (the
form's, and the corrected one's when there is one). Writes PNG (default calibration.png
beside POINTS).
"""
import argparse
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import servelab_plots as sp  # noqa: E402

COLUMNS = ["kind", "file", "op", "tokens", "batch", "context", "tp", "measured_ms",
           "predicted_ms"]


def load(path):
    if not os.path.isfile(path):
        raise sp.InputError(f"{path}: file not found")
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise sp.InputError(f"{path}: empty file (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise sp.InputError(f"{path}: cannot parse CSV: {e}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise sp.InputError(f"{path}: missing column(s) {', '.join(missing)}")
    for c in ["tokens", "tp", "measured_ms", "predicted_ms"]:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df = df.dropna(subset=["tokens", "tp", "measured_ms", "predicted_ms"])
    df = df[(df.measured_ms > 0) & (df.predicted_ms > 0)]
    if df.empty:
        raise sp.InputError(f"{path}: no rows with positive times")
    # Older files have neither: the prediction is the form's, uncorrected.
    for c in ["form_ms", "leave_one_out_ms"]:
        df[c] = pd.to_numeric(df[c], errors="coerce") if c in df.columns else np.nan
        df[c] = df[c].fillna(df.predicted_ms)
    # What a row is predicted as when corrected: from its shape's other rows when fitted.
    df["corrected_ms"] = np.where(df.kind == "fit", df.leave_one_out_ms, df.predicted_ms)
    return df


def main(argv):
    parser = argparse.ArgumentParser(prog="calibration.py", description=__doc__.split("\n")[0])
    parser.add_argument("points")
    parser.add_argument("--out")
    parser.add_argument("--max-ops", type=int, default=16)
    args = parser.parse_args(argv)
    df = load(args.points)
    ops = df.op.value_counts().index[: max(1, args.max_ops)]
    cols = min(4, len(ops))
    rows = math.ceil(len(ops) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    tps = sorted(df.tp.unique())
    colors = {tp: plt.cm.viridis(i / max(1, len(tps) - 1)) for i, tp in enumerate(tps)}
    for ax, op in zip(axes.flat, ops):
        d = df[df.op == op]
        for (kind, tp), g in d.groupby(["kind", "tp"]):
            g = g.sort_values("tokens")
            filled = kind == "fit"
            ax.scatter(g.tokens, g.measured_ms, s=8, color=colors[tp],
                       facecolors=colors[tp] if filled else "none",
                       label=f"TP {int(tp)} {'fit' if filled else 'evaluated'}")
            ax.scatter(g.tokens, g.form_ms, s=10, marker="x", color=colors[tp], alpha=0.6)
            if (g.corrected_ms != g.form_ms).any():
                ax.plot(g.tokens, g.corrected_ms, lw=0.7, color=colors[tp], alpha=0.8)
        def mape(col):
            return 100 * np.mean(np.abs(d[col] - d.measured_ms) / d.measured_ms)
        title = f"{op}  (MAPE {mape('form_ms'):.1f}%"
        if (d.corrected_ms != d.form_ms).any():
            title += f", corrected {mape('corrected_ms'):.1f}%"
        ax.set_title(title + ")", fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens (attention_decode: sequences)", fontsize=8)
        ax.set_ylabel("ms per layer / step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.minorticks_off()
    for ax in list(axes.flat)[len(ops):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.legend(handles, labels, loc="upper center", ncol=min(8, len(labels)), fontsize=8,
               title="measured: dots, the fitted form: crosses, with GEMM corrections: lines",
               title_fontsize=8)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.points)), "calibration.png")
    return [sp.save(fig, os.path.dirname(os.path.abspath(out)), os.path.basename(out))]


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
