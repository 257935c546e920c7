#!/usr/bin/python3
"""Shared helpers for servelab's plot scripts: loading a run's CSVs with clear
errors, empirical CDFs, time binning of steps.csv, and figure saving.

Invariants (see README.md): scripts read only requests.csv, steps.csv and the
"name" field of summary.json; they never modify a result folder except by
writing PNGs into the chosen output folder.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib import ticker  # noqa: E402

DPI = 120
MAX_POINTS = 2000  # per replica in time plots
MAX_SERIES = 8     # clients drawn separately; the rest are folded into "other"

# Column -> dtype. Numeric columns are float64 so empty cells (rejected rows) are NaN.
REQUEST_DTYPES = {
    "id": str, "client": str, "replica": str, "status": str, "reject_reason": str,
    "arrival_s": "float64", "first_token_s": "float64", "finish_s": "float64",
    "input_tokens": "float64", "output_tokens": "float64", "ttft_s": "float64",
    "e2e_s": "float64", "tpot_s": "float64", "queue_s": "float64",
    "preemptions": "float64",
    "cached_tokens": "float64",  # with scheduler.prefix_cache only
}
# steps.csv can hold millions of rows: float32 counts halve the memory; they are
# exact below 2^24, far above any batch size, token count or block count.
STEP_DTYPES = {
    "replica": "category", "start_s": "float64", "duration_s": "float64",
    "batch_size": "float32", "prefill_tokens": "float32", "decode_tokens": "float32",
    "kv_blocks_used": "float32", "kv_blocks_total": "float32", "waiting": "float32",
    "preempted": "float32",
    "cached_tokens": "float32",  # with scheduler.prefix_cache only
}


class InputError(Exception):
    """Bad or missing input; the scripts print it and exit with status 2."""


def run_main(main, argv=None):
    """Runs main(argv) -> list of PNG paths; prints them; maps InputError to exit 2."""
    try:
        paths = main(sys.argv[1:] if argv is None else argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


# ---------------------------------------------------------------- loading

def add_run_arguments(parser):
    """The result folders and --labels of the plots that set several runs side by side."""
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="result folders")
    parser.add_argument("--labels", help="comma-separated, one per DIR (default: folder names)")


def run_labels(dirs, labels=None):
    """One label per result folder: --labels split on commas, or the folder names (numbered
    when two folders share a name)."""
    if labels is None:
        names = [os.path.basename(os.path.normpath(os.path.abspath(d))) for d in dirs]
        if len(set(names)) < len(names):  # same folder name in different places
            names = [f"{i + 1}:{name}" for i, name in enumerate(names)]
        return names
    names = [s.strip() for s in labels.split(",")]
    if len(names) != len(dirs):
        raise InputError(f"--labels has {len(names)} label(s) for {len(dirs)} result folder(s)")
    return names


def runs_title(prefix, labels, dirs, runs):
    """A figure title naming each run: its label, its experiment name and its counts."""
    names = ", ".join(f"{lab} = {run_name(d)} ({status_counts(r)})"
                      for lab, d, r in zip(labels, dirs, runs))
    return f"{prefix}: {names}"


def check_result_dir(result_dir):
    if not os.path.isdir(result_dir):
        raise InputError(f"{result_dir}: not a directory (expected a run's result folder)")


def run_name(result_dir):
    """summary.json's "name" when it has one, else the folder's name."""
    folder = os.path.basename(os.path.normpath(os.path.abspath(result_dir)))
    try:
        with open(os.path.join(result_dir, "summary.json"), encoding="utf-8") as f:
            name = json.load(f).get("name")
        if isinstance(name, str) and name.strip():
            return name.strip()
    except (OSError, ValueError, AttributeError):
        pass
    return folder


def _first_bad_value(path, columns):
    """Names the first numeric column holding a non-number, for a clear message."""
    raw = pd.read_csv(path, usecols=list(columns), dtype=str, keep_default_na=False)
    for col, dtype in columns.items():
        if dtype in (str, "category"):
            continue
        text = raw[col].str.strip()
        bad = (text != "") & pd.to_numeric(text, errors="coerce").isna()
        bad &= ~text.str.lower().isin(["nan", "inf", "-inf"])
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            return (f"{path}: column '{col}', line {row + 2}: "
                    f"'{raw[col].iloc[row]}' is not a number")
    return None


def read_csv_checked(path, dtypes, required):
    """Reads the `required` columns of a CSV with the given dtypes.

    Missing file, missing header or missing column -> InputError naming the file
    and the column. Extra columns are ignored. A header with no rows is not an
    error: it gives an empty DataFrame (the plots then say "no data").
    """
    if not os.path.isfile(path):
        raise InputError(f"{path}: file not found")
    try:
        header = list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot parse CSV header: {e}") from None
    header = [str(c).strip() for c in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} "
                         f"(found: {', '.join(header)})")
    columns = {c: dtypes[c] for c in required}
    try:
        df = pd.read_csv(path, usecols=required, dtype=columns, engine="c",
                         skipinitialspace=True)
    except (ValueError, pd.errors.ParserError) as e:
        msg = None
        try:
            msg = _first_bad_value(path, columns)
        except (ValueError, pd.errors.ParserError):
            pass
        raise InputError(msg or f"{path}: cannot parse: {e}") from None
    return df


def load_requests(result_dir, required):
    df = read_csv_checked(os.path.join(result_dir, "requests.csv"), REQUEST_DTYPES, required)
    for col in ("status", "client"):
        if col in df:
            df[col] = df[col].fillna("").str.strip()
    return df


def load_steps(result_dir, required):
    return read_csv_checked(os.path.join(result_dir, "steps.csv"), STEP_DTYPES, required)


def finished(requests):
    return requests[requests["status"] == "finished"]


def status_counts(requests):
    n_fin = int((requests["status"] == "finished").sum())
    n_rej = int((requests["status"] == "rejected").sum())
    other = len(requests) - n_fin - n_rej
    text = f"{n_fin} finished, {n_rej} rejected"
    return text + (f", {other} other" if other else "")


def output_throughput(requests):
    """Output tokens/s: sum output_tokens of finished / (max finish_s - min arrival_s),
    both taken over finished requests. 0 when there is nothing to measure."""
    fin = finished(requests)
    span = fin["finish_s"].max() - fin["arrival_s"].min() if len(fin) else np.nan
    if not np.isfinite(span) or span <= 0:
        return 0.0
    return float(fin["output_tokens"].sum() / span)


def replica_order(values):
    """Replica labels sorted numerically when they are numbers."""
    labels = [str(v) for v in pd.unique(values)]
    try:
        return sorted(labels, key=float)
    except ValueError:
        return sorted(labels)


# ---------------------------------------------------------------- time binning

def bin_by_time(df, time_col, value_cols, max_points=MAX_POINTS):
    """Downsamples each replica's rows to at most `max_points` time bins.

    Returns {replica: DataFrame indexed by bin-centre time with columns
    (col, "mean"), (col, "max"), (col, "sum"), (col, "count")} and the bin width in seconds
    (0 when no binning was needed: every row is its own point). Bins are shared
    by all replicas so their lines align; empty bins are left out.
    """
    out = {}
    if df.empty:
        return out, 0.0
    t = df[time_col].to_numpy(dtype="float64")
    t0, t1 = float(np.nanmin(t)), float(np.nanmax(t))
    per_replica = df.groupby("replica", observed=True).size()
    if per_replica.max() <= max_points or t1 <= t0:
        width = 0.0
        key = df[time_col]
    else:
        width = (t1 - t0) / max_points
        idx = np.minimum(((t - t0) / width).astype(np.int64), max_points - 1)
        key = pd.Series(t0 + (idx + 0.5) * width, index=df.index, name=time_col)
    grouped = df[value_cols].groupby([df["replica"], key], observed=True, sort=True)
    stats = grouped.agg(["mean", "max", "sum", "count"])
    for rep in replica_order(df["replica"]):
        rep_key = rep if rep in stats.index.get_level_values(0) else None
        if rep_key is None:
            continue
        out[rep] = stats.xs(rep, level=0)
    return out, width


def rolling_mean(stats, col, window_s):
    """Mean per step of `col` over a centred time window of `window_s` seconds,
    from bin_by_time's per-bin sums and counts (so bins weigh by their steps)."""
    idx = pd.to_timedelta(stats.index.to_numpy(), unit="s")
    sums = pd.Series(stats[(col, "sum")].to_numpy(dtype="float64"), index=idx)
    counts = pd.Series(stats[(col, "count")].to_numpy(dtype="float64"), index=idx)
    window = pd.Timedelta(seconds=max(window_s, 1e-9))
    mean = (sums.rolling(window, center=True).sum()
            / counts.rolling(window, center=True).sum())
    return mean.to_numpy()


# ---------------------------------------------------------------- CDFs

def fmt(v):
    """Three significant digits, no exponent for everyday magnitudes."""
    if not np.isfinite(v):
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def ecdf_points(values, max_points=4000):
    """Sorted x and cumulative fraction y; large inputs are reduced to quantiles."""
    x = np.sort(values)
    n = len(x)
    if n > max_points:
        q = np.linspace(0.0, 1.0, max_points)
        return np.quantile(x, q), q
    # Start at (min, 0) so the first jump is drawn too.
    return np.concatenate([x[:1], x]), np.arange(0, n + 1) / n


def use_log_scale(all_values):
    pos = all_values[all_values > 0]
    return len(pos) >= 2 and pos.max() / pos.min() >= 20


def plot_cdfs(ax, series, xlabel, unit, title):
    """One empirical CDF per (label, values, color) with p50/p99 marked.

    Log-x when the positive values span more than ~1.3 decades; values <= 0 then
    sit off-axis, so each curve starts at the fraction they make up (noted in
    the legend). Returns False (and writes "no data") when nothing is plottable.
    """
    series = [(lab, v[np.isfinite(v)], c) for lab, v, c in series]
    series = [(lab, v, c) for lab, v, c in series if len(v)]
    ax.set_title(title)
    if not series:
        no_data(ax)
        return False
    log = use_log_scale(np.concatenate([v for _, v, _ in series]))
    for label, v, color in series:
        x, y = ecdf_points(v)
        p50, p99 = np.percentile(v, [50, 99])
        note = ""
        if log:
            keep = x > 0
            if not keep.all():
                note = f", {100 * np.mean(v <= 0):.0f}% at 0"
            x, y = x[keep], y[keep]
        lw = 2.0 if label == "all" else 1.4
        ax.step(x, y, where="post", color=color, lw=lw,
                label=f"{label}: p50 {fmt(p50)} {unit}, p99 {fmt(p99)} {unit} "
                      f"(n={len(v)}{note})")
        for p, q, marker in ((p50, 0.50, "o"), (p99, 0.99, "^")):
            if log and p <= 0:
                continue
            ax.vlines(p, 0, q, colors=color, linestyles=":", lw=1.0, alpha=0.8)
            ax.plot([p], [q], marker=marker, color=color, ms=5, ls="none")
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    for q in (0.5, 0.99):
        ax.axhline(q, color="0.8", lw=0.8, zorder=0)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel(f"{xlabel} ({unit}{', log scale' if log else ''})")
    ax.set_ylabel("fraction of requests ≤ x")
    ax.grid(True, which="major", alpha=0.3)
    # A CDF rises from lower left to upper right: upper left is usually empty.
    ax.legend(fontsize=7, loc="upper left", title="o p50   ^ p99", title_fontsize=7)
    return True


def split_by_client(fin, column, scale, max_series=MAX_SERIES):
    """[(label, values, color)]: "all" plus one per client when there are several."""
    colors = plt.get_cmap("tab10").colors
    everything = fin[column].to_numpy(dtype="float64") * scale
    clients = fin["client"].value_counts()
    if len(clients) <= 1:
        return [("all", everything, "black")]
    series = [("all", everything, "black")]
    shown = list(clients.index[:max_series])
    for i, client in enumerate(sorted(shown)):
        v = fin.loc[fin["client"] == client, column].to_numpy(dtype="float64") * scale
        series.append((client or "(unnamed)", v, colors[i % len(colors)]))
    if len(clients) > max_series:
        rest = fin.loc[~fin["client"].isin(shown), column].to_numpy(dtype="float64") * scale
        series.append((f"other {len(clients) - max_series} clients", rest, "0.5"))
    return series


# ---------------------------------------------------------------- figures

def no_data(ax, text="no data"):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            fontsize=14, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def out_dir(out, result_dir):
    return out if out else os.path.join(result_dir, "plots")


def save(fig, directory, filename):
    """Writes the figure beside its place and renames it there: a figure that fails half
    way leaves the earlier one whole."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, filename)
    stem, ext = os.path.splitext(filename)
    partial = os.path.join(directory, ".%s.partial.%d%s" % (stem, os.getpid(), ext))
    try:
        fig.savefig(partial, dpi=DPI, bbox_inches="tight")
        os.replace(partial, path)
    finally:
        plt.close(fig)
        if os.path.exists(partial):
            os.remove(partial)
    return path
