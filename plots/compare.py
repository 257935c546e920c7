#!/usr/bin/python3
"""Side-by-side comparison of several runs: TTFT / TPOT / E2E CDF overlays, and bars of
output throughput and p50/p99 TTFT and E2E.

usage: compare.py DIR1 DIR2 ... [--labels a,b,...] [--out DIR]   (default DIR: DIR1/plots)
Reads each DIR/requests.csv; writes compare.png. Throughput is output tokens/s:
sum of output_tokens over finished requests / (max finish_s - min arrival_s), both
over finished requests.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["status", "arrival_s", "finish_s", "output_tokens", "ttft_s", "tpot_s", "e2e_s"]
CDFS = [("ttft_s", "TTFT", "s", 1.0),
        ("tpot_s", "TPOT", "ms", 1e3),
        ("e2e_s", "E2E latency", "s", 1.0)]


def _annotate(ax, bars, values, unit=""):
    for bar, v in zip(bars, values):
        text = "no data" if not np.isfinite(v) else f"{sp.fmt(v)}{unit}"
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=7, xytext=(0, 2),
                    textcoords="offset points")


def _percentile_bars(ax, labels, colors, fins, col, title):
    x = np.arange(len(labels))
    w = 0.38
    for q, offset, alpha, hatch in ((50, -w / 2, 1.0, None), (99, w / 2, 0.5, "//")):
        vals = [np.percentile(v, q) if len(v) else np.nan
                for v in (f[col].dropna().to_numpy() for f in fins)]
        bars = ax.bar(x + offset, np.nan_to_num(vals), w, color=colors, alpha=alpha,
                      hatch=hatch, edgecolor="0.3", lw=0.5)
        _annotate(ax, bars, vals)
    ax.set_xticks(x, labels, rotation=20, ha="right")
    ax.set_ylabel(f"{title} (s)")
    ax.set_title(f"{title}: p50 (solid) and p99 (hatched)")
    ax.legend(handles=[Patch(facecolor="0.45", edgecolor="0.3", label="p50"),
                       Patch(facecolor="0.45", alpha=0.5, hatch="//", edgecolor="0.3",
                             label="p99")], fontsize=8, loc="upper left")


def draw(dirs, labels, out):
    for d in dirs:
        sp.check_result_dir(d)
    runs = [sp.load_requests(d, REQUIRED) for d in dirs]
    fins = [sp.finished(r) for r in runs]
    colors = [plt.get_cmap("tab10").colors[i % 10] for i in range(len(dirs))]

    fig, axes = plt.subplots(2, 3, figsize=(17, 10))
    for ax, (col, title, unit, scale) in zip(axes[0], CDFS):
        series = [(lab, f[col].to_numpy(dtype="float64") * scale, c)
                  for lab, f, c in zip(labels, fins, colors)]
        sp.plot_cdfs(ax, series, title, unit, f"{title} CDF")

    ax = axes[1][0]
    tput = [sp.output_throughput(r) for r in runs]
    bars = ax.bar(np.arange(len(labels)), tput, 0.6, color=colors, edgecolor="0.3", lw=0.5)
    _annotate(ax, bars, [t if t > 0 else np.nan for t in tput])
    ax.set_xticks(np.arange(len(labels)), labels, rotation=20, ha="right")
    ax.set_ylabel("output tokens / s")
    ax.set_title("Output throughput (finished requests)")
    _percentile_bars(axes[1][1], labels, colors, fins, "ttft_s", "TTFT")
    _percentile_bars(axes[1][2], labels, colors, fins, "e2e_s", "E2E latency")
    for a in axes[1]:
        a.grid(True, axis="y", alpha=0.3)
        a.set_ylim(bottom=0)
        a.margins(y=0.12)

    fig.suptitle(sp.runs_title("Comparison", labels, dirs, runs), fontsize=11, wrap=True)
    fig.tight_layout()
    return [sp.save(fig, sp.out_dir(out, dirs[0]), "compare.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sp.add_run_arguments(parser)
    parser.add_argument("--out", metavar="DIR", help="output folder (default DIR1/plots)")
    args = parser.parse_args(argv)
    labels = sp.run_labels(args.dirs, args.labels)
    return draw(args.dirs, labels, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
