#!/usr/bin/python3
"""Latency by output length: who gains and who pays when a policy reorders requests.

usage: by_length.py DIR1 DIR2 ... [--labels a,b,...] [--edges 50,200,1000] [--out DIR]
       (default DIR: DIR1/plots)
Reads each DIR/requests.csv (finished rows) and groups requests by output_tokens into
buckets: (0, e1], (e1, e2], ..., (ek, inf). Default edges: the quartiles of the first
run's output lengths. For each bucket, bars per run of mean (solid) and p99 (hatched)
E2E latency and TTFT, on log axes; the x labels give each bucket's request count.
Writes by_length.png.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["status", "output_tokens", "ttft_s", "e2e_s"]
PANELS = [("e2e_s", "E2E latency"), ("ttft_s", "TTFT")]


def parse_edges(text):
    try:
        edges = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise sp.InputError(f"--edges must be comma-separated numbers, not '{text}'") from None
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] <= 0:
        raise sp.InputError(f"--edges must be positive and increasing, not '{text}'")
    return edges


def quartile_edges(lengths):
    """Distinct, rounded quartiles of the lengths (possibly fewer than three)."""
    if not len(lengths):
        return []
    qs = np.unique(np.round(np.percentile(lengths, [25, 50, 75])))
    return [float(q) for q in qs if q < lengths.max()]


def bucket_labels(edges):
    def n(v):
        return f"{v:g}"
    if not edges:
        return ["all"]
    labels = [f"≤{n(edges[0])}"]
    labels += [f"{n(a + 1) if float(a).is_integer() else n(a)}–{n(b)}"
               for a, b in zip(edges, edges[1:])]
    labels.append(f">{n(edges[-1])}")
    return labels


def bucket_index(lengths, edges):
    """Bucket of each length: 0 for (0, e1], i for (e_i, e_i+1], k for > e_k."""
    return np.searchsorted(np.asarray(edges, dtype="float64"), lengths, side="left")


def stats(values):
    if not len(values):
        return np.nan, np.nan
    return float(np.mean(values)), float(np.percentile(values, 99))


def draw(dirs, labels, edges, out):
    for d in dirs:
        sp.check_result_dir(d)
    runs = [sp.load_requests(d, REQUIRED) for d in dirs]
    fins = [sp.finished(r) for r in runs]
    if edges is None:
        edges = quartile_edges(fins[0]["output_tokens"].dropna().to_numpy(dtype="float64"))
    names = bucket_labels(edges)
    nb, nr = len(names), len(dirs)
    colors = [plt.get_cmap("tab10").colors[i % 10] for i in range(nr)]
    idx = [bucket_index(f["output_tokens"].to_numpy(dtype="float64"), edges) for f in fins]
    counts = [int(np.sum(idx[0] == b)) for b in range(nb)]

    fig, axes = plt.subplots(1, len(PANELS), figsize=(7.5 * len(PANELS), 5.2))
    width = 0.8 / nr
    for ax, (col, title) in zip(axes, PANELS):
        ax.set_title(f"{title} by output length: mean (solid), p99 (hatched)")
        if not any(len(f) for f in fins):
            sp.no_data(ax)
            continue
        for r, (fin, ib, color, label) in enumerate(zip(fins, idx, colors, labels)):
            values = fin[col].to_numpy(dtype="float64")
            means, p99s = zip(*(stats(values[(ib == b) & np.isfinite(values)])
                                for b in range(nb)))
            x = np.arange(nb) - 0.4 + width * (r + 0.5)
            for vals, alpha, hatch in ((p99s, 0.45, "//"), (means, 1.0, None)):
                bars = ax.bar(x, np.nan_to_num(vals), width * 0.9, color=color, alpha=alpha,
                              hatch=hatch, edgecolor="0.3", lw=0.5)
                for bar, v in zip(bars, vals):
                    if np.isfinite(v) and v > 0:
                        ax.annotate(sp.fmt(v), (bar.get_x() + bar.get_width() / 2, v),
                                    ha="center", va="bottom", fontsize=6, xytext=(0, 1),
                                    textcoords="offset points")
        ax.set_yscale("log")
        ax.set_xticks(np.arange(nb), [f"{n}\n(n={c})" for n, c in zip(names, counts)])
        ax.set_xlabel(f"output tokens (request counts from {labels[0]})")
        ax.set_ylabel(f"{title} (s, log scale)")
        ax.grid(True, axis="y", which="major", alpha=0.3)
        handles = [Patch(facecolor=c, edgecolor="0.3", label=lab) for c, lab in zip(colors, labels)]
        handles += [Patch(facecolor="0.6", edgecolor="0.3", label="mean"),
                    Patch(facecolor="0.6", alpha=0.45, hatch="//", edgecolor="0.3", label="p99")]
        ax.legend(handles=handles, fontsize=8, loc="upper left")
    fig.suptitle(sp.runs_title("By output length", labels, dirs, runs), fontsize=11, wrap=True)
    fig.tight_layout()
    return [sp.save(fig, sp.out_dir(out, dirs[0]), "by_length.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sp.add_run_arguments(parser)
    parser.add_argument("--edges", help="bucket upper bounds in output tokens: 50,200,1000 "
                                        "(default: the first run's quartiles)")
    parser.add_argument("--out", metavar="DIR", help="output folder (default DIR1/plots)")
    args = parser.parse_args(argv)
    labels = sp.run_labels(args.dirs, args.labels)
    edges = parse_edges(args.edges) if args.edges is not None else None
    return draw(args.dirs, labels, edges, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
