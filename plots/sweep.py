#!/usr/bin/python3
"""Metrics of a sweep against one of its axes: one line per value of a second axis,
one column of panels per value of a third.

usage: sweep.py SWEEP [--x AXIS] [--series AXIS] [--panels AXIS] [--metrics m1,m2,...]
                [--logx] [--out DIR]   (default DIR: the folder holding SWEEP)
SWEEP is a sweep.csv or compare.csv written by `servelab sweep` / `servelab compare`, or
the folder holding one. Axis columns are those before `folder`; --x defaults to the
first. Every axis that is not --x, --series or --panels must hold one value (otherwise
exit 2, naming it). Rows whose status is not `ok` are left out. One row of panels per
metric (default output_throughput,e2e_mean_s). Writes sweep.png.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import ticker  # noqa: E402

import servelab_plots as sp  # noqa: E402

DEFAULT_METRICS = ["output_throughput", "e2e_mean_s"]
# Column -> (axis label, scale); others are labelled with their own name.
METRIC_LABELS = {
    "output_throughput": ("output tokens / s", 1.0),
    "request_throughput": ("requests / s", 1.0),
    "ttft_p50_s": ("TTFT p50 (s)", 1.0), "ttft_p99_s": ("TTFT p99 (s)", 1.0),
    "tpot_p50_s": ("TPOT p50 (ms)", 1e3), "tpot_p99_s": ("TPOT p99 (ms)", 1e3),
    "e2e_mean_s": ("E2E mean (s)", 1.0), "e2e_p50_s": ("E2E p50 (s)", 1.0),
    "e2e_p99_s": ("E2E p99 (s)", 1.0), "queue_mean_s": ("queueing mean (s)", 1.0),
    "goodput": ("goodput (req/s)", 1.0), "slo_attainment": ("SLO attainment", 1.0),
    "preemptions": ("preemptions", 1.0), "gpu_busy_fraction": ("GPU busy fraction", 1.0),
    "cost_per_million_output_tokens": ("$ per M output tokens", 1.0),
}


def find_csv(path):
    if os.path.isdir(path):
        for name in ("sweep.csv", "compare.csv"):
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return candidate
        raise sp.InputError(f"{path}: no sweep.csv or compare.csv in this folder")
    if not os.path.isfile(path):
        raise sp.InputError(f"{path}: file not found")
    return path


def load(path):
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise sp.InputError(f"{path}: empty file (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise sp.InputError(f"{path}: cannot parse CSV: {e}") from None
    df.columns = [str(c).strip() for c in df.columns]
    for col in ("folder", "status"):
        if col not in df.columns:
            raise sp.InputError(f"{path}: missing column {col} (found: {', '.join(df.columns)})")
    axes = list(df.columns[:list(df.columns).index("folder")])
    if not axes:
        raise sp.InputError(f"{path}: no axis columns before 'folder'")
    return df, axes


def numeric(values):
    """The values as floats when every one is a number, else None."""
    out = pd.to_numeric(pd.Series(values, dtype=str).str.strip(), errors="coerce")
    return None if out.isna().any() else out.to_numpy(dtype="float64")


def ordered(values):
    """Distinct values, numerically sorted when all are numbers, else in file order."""
    distinct = list(dict.fromkeys(values))
    nums = numeric(distinct)
    if nums is not None:
        return [v for _, v in sorted(zip(nums, distinct))]
    return distinct


def metric_values(df, path, metric):
    text = df[metric].str.strip()
    values = pd.to_numeric(text, errors="coerce")
    bad = values.isna() & (text != "") & ~text.str.lower().isin(["nan", "inf", "-inf"])
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise sp.InputError(f"{path}: column '{metric}', line {df.index[row] + 2}: "
                            f"'{df[metric].iloc[row]}' is not a number")
    return values.to_numpy(dtype="float64")


def draw(path, x, series, panels, metrics, logx, out):
    df, axes = load(path)
    for role, name in (("--x", x), ("--series", series), ("--panels", panels)):
        if name is not None and name not in axes:
            raise sp.InputError(f"{path}: {role} {name} is not an axis of this sweep "
                                f"(axes: {', '.join(axes)})")
    used = [a for a in (x, series, panels) if a is not None]
    if len(set(used)) < len(used):
        raise sp.InputError("--x, --series and --panels must name different axes")
    for a in axes:
        if a not in used and df[a].nunique() > 1:
            raise sp.InputError(f"{path}: axis {a} takes {df[a].nunique()} values; give it as "
                                f"--series or --panels (or plot a sweep that fixes it)")
    missing = [m for m in metrics if m not in df.columns]
    if missing:
        raise sp.InputError(f"{path}: missing column(s) {', '.join(missing)} "
                            f"(found: {', '.join(df.columns)})")
    ok = df[df["status"].str.strip() == "ok"]
    n_left_out = len(df) - len(ok)

    panel_values = ordered(df[panels]) if panels else [None]
    series_values = ordered(df[series]) if series else [None]
    x_values = ordered(df[x])
    x_nums = numeric(x_values)
    if logx and (x_nums is None or (x_nums <= 0).any()):
        raise sp.InputError(f"--logx needs positive numbers on {x}")
    x_pos = dict(zip(x_values, x_nums if x_nums is not None else range(len(x_values))))
    colors = plt.get_cmap("tab10").colors

    nrows, ncols = len(metrics), len(panel_values)
    fig, grid = plt.subplots(nrows, ncols, figsize=(5.2 * ncols + 0.8, 3.6 * nrows + 0.8),
                             squeeze=False)
    for i, metric in enumerate(metrics):
        label, scale = METRIC_LABELS.get(metric, (metric, 1.0))
        values = metric_values(ok, path, metric) * scale if len(ok) else np.array([])
        for j, pv in enumerate(panel_values):
            ax = grid[i][j]
            in_panel = (ok[panels] == pv).to_numpy() if panels else np.ones(len(ok), bool)
            drawn = False
            for k, sv in enumerate(series_values):
                keep = in_panel & ((ok[series] == sv).to_numpy() if series else True)
                if not keep.any():
                    continue
                xs = np.array([x_pos[v] for v in ok[x][keep]], dtype="float64")
                ys = values[keep]
                order = np.argsort(xs, kind="stable")
                ax.plot(xs[order], ys[order], marker="o", ms=4, lw=1.5,
                        color=colors[k % len(colors)],
                        label=f"{series}={sv}" if series else metric)
                drawn = True
            title = f"{panels}={pv}" if panels else ""
            if i == 0 and title:
                ax.set_title(title, fontsize=10)
            if not drawn:
                sp.no_data(ax)
                continue
            if logx:
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            if x_nums is not None:
                ax.set_xticks(x_nums)
                ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
                ax.xaxis.set_minor_locator(ticker.NullLocator())
            else:
                ax.set_xticks(range(len(x_values)), x_values, rotation=20, ha="right")
            ax.set_xlabel(x)
            ax.set_ylabel(label)
            ax.grid(True, alpha=0.3)
            if series:
                ax.legend(fontsize=8)
    note = f", {n_left_out} failed point(s) left out" if n_left_out else ""
    fig.suptitle(f"{os.path.basename(os.path.dirname(os.path.abspath(path)))}: "
                 f"{len(ok)} points{note}", fontsize=11)
    fig.tight_layout()
    return [sp.save(fig, out or os.path.dirname(os.path.abspath(path)), "sweep.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", metavar="SWEEP", help="sweep.csv / compare.csv, or its folder")
    parser.add_argument("--x", help="axis on the x axis (default: the first axis)")
    parser.add_argument("--series", help="axis drawn as one line per value")
    parser.add_argument("--panels", help="axis drawn as one column of panels per value")
    parser.add_argument("--metrics", default=",".join(DEFAULT_METRICS),
                        help="comma-separated sweep.csv columns, one row of panels each")
    parser.add_argument("--logx", action="store_true", help="log2 x axis")
    parser.add_argument("--out", metavar="DIR", help="output folder (default: SWEEP's folder)")
    args = parser.parse_args(argv)
    path = find_csv(args.sweep)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if not metrics:
        raise sp.InputError("--metrics names no column")
    x = args.x
    if x is None:
        x = load(path)[1][0]
    return draw(path, x, args.series, args.panels, metrics, args.logx, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
