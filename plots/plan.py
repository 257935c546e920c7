#!/usr/bin/python3
"""A capacity plan's candidates: output tokens/s per GPU against tokens/s per user.

usage: plan.py PLAN [--out FILE]   (default FILE: plan.png beside PLAN)
PLAN is a plan.csv written by `servelab plan`, or the folder holding one. Each searched
candidate with a rate is a point at its max rate (x: output_tok_s_per_user, the decode
speed one user sees; y: output_tok_s_per_gpu, what a GPU earns); the Pareto front (no
other candidate is at least as good on both and better on one) is joined and labelled.
This is the view of NVIDIA's AIConfigurator. Candidates that failed or serve no rate
are listed under the axes. Prints the path of the figure.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import servelab_plots as sp  # noqa: E402

DTYPES = {"candidate": str, "status": str, "max_rate": "float64",
          "output_tok_s_per_user": "float64", "output_tok_s_per_gpu": "float64"}
REQUIRED = list(DTYPES)


def pareto_front(x, y):
    """Indices of the points no other point dominates (>= on both, > on one), by x."""
    order = np.lexsort((-y, -x))  # x descending, then y descending
    front, best_y = [], -np.inf
    for i in order:
        if y[i] > best_y:
            front.append(i)
            best_y = y[i]
    return sorted(front, key=lambda i: x[i])


def draw(path, out):
    if os.path.isdir(path):
        path = os.path.join(path, "plan.csv")
    df = sp.read_csv_checked(path, DTYPES, REQUIRED)
    usable = (df["status"] == "ok") & (df["max_rate"] > 0)
    usable &= df["output_tok_s_per_user"].notna() & df["output_tok_s_per_gpu"].notna()
    ok = df[usable].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(9, 6))
    ax.set_title("capacity plan: each candidate at its highest rate within the SLO")
    if len(ok):
        x = ok["output_tok_s_per_user"].to_numpy()
        y = ok["output_tok_s_per_gpu"].to_numpy()
        ax.scatter(x, y, s=28, color="tab:gray", alpha=0.7, label="candidate")
        front = pareto_front(x, y)
        ax.plot(x[front], y[front], "-o", color="tab:red", lw=1.5, ms=6, label="Pareto front")
        for i in front:
            ax.annotate(ok["candidate"].iloc[i], (x[i], y[i]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("output tokens / s per user (1 / mean TPOT)")
        ax.set_ylabel("output tokens / s per GPU")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    else:
        sp.no_data(ax, "no candidate serves a rate within the SLO")
    left_out = df[~usable]["candidate"].tolist()
    if left_out:
        shown = ", ".join(left_out[:8]) + (f" and {len(left_out) - 8} more" if len(left_out) > 8 else "")
        fig.text(0.01, 0.005, f"no rate: {shown}", fontsize=7, color="0.4")
    if out is None:
        out = os.path.join(os.path.dirname(path), "plan.png")
    return [sp.save(fig, os.path.dirname(out) or ".", os.path.basename(out))]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", metavar="PLAN", help="plan.csv, or the folder holding it")
    parser.add_argument("--out", metavar="FILE", help="figure path (default: plan.png beside PLAN)")
    args = parser.parse_args(argv)
    return draw(args.plan, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
