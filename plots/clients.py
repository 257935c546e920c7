#!/usr/bin/python3
"""Per-client service over time and per-client TTFT, one column per run.

usage: clients.py DIR1 [DIR2 ...] [--labels a,b,...] [--ttft-slo SECONDS] [--ratio]
                  [--out DIR]   (default DIR: DIR1/plots)
Reads each DIR/requests.csv (finished rows); writes clients.png. Top row: each client's
cumulative output tokens against finish time, with the last arrival marked (while
every client is still sending, this is the service each one got); the legend gives
each client's tokens by then (--ratio: their max / min in the title). Bottom row: TTFT CDFs per client (and "all"), with the
SLO as a dashed line when --ttft-slo is given.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["client", "status", "arrival_s", "finish_s", "output_tokens", "ttft_s"]


def client_groups(fins, max_series=sp.MAX_SERIES):
    """[(label, client names)] shared by every run: the most frequent clients (over all
    runs) one by one, in name order, and the rest folded into one "other" group."""
    counts = {}
    for fin in fins:
        for client, n in fin["client"].value_counts().items():
            counts[client] = counts.get(client, 0) + int(n)
    ranked = sorted(counts, key=lambda c: (-counts[c], c))
    shown = sorted(ranked[:max_series])
    groups = [(c or "(unnamed)", [c]) for c in shown]
    rest = ranked[max_series:]
    if rest:
        groups.append((f"other {len(rest)} clients", rest))
    return groups


def cumulative_service(fin, names):
    """Finish times (sorted) and the running sum of output tokens of those clients."""
    rows = fin[fin["client"].isin(names)].sort_values("finish_s", kind="stable")
    return (rows["finish_s"].to_numpy(dtype="float64"),
            np.cumsum(rows["output_tokens"].to_numpy(dtype="float64")))


def tokens_by(times, cum, t):
    """Tokens delivered at or before t (0 before the first finish)."""
    i = np.searchsorted(times, t, side="right")
    return float(cum[i - 1]) if i > 0 else 0.0


def draw_service(ax, fin, groups, colors, last_arrival, title, ratio):
    ax.set_title(title)
    if fin.empty:
        sp.no_data(ax)
        return
    by_then = []
    for (label, names), color in zip(groups, colors):
        times, cum = cumulative_service(fin, names)
        if not len(times):
            continue
        got = tokens_by(times, cum, last_arrival)
        by_then.append(got)
        ax.step(np.concatenate([[0.0], times]), np.concatenate([[0.0], cum]), where="post",
                color=color, lw=1.5, label=f"{label}: {sp.fmt(got)} tok by last arrival")
    if np.isfinite(last_arrival):
        ax.axvline(last_arrival, color="0.4", ls=":", lw=1.0)
        ax.annotate("last arrival", (last_arrival, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -12), textcoords="offset points", fontsize=7, color="0.3")
    positive = [v for v in by_then if v > 0]
    if ratio and len(by_then) >= 2 and len(positive) == len(by_then):
        ax.set_title(f"{title}\nmax / min by last arrival = {max(by_then) / min(by_then):.2f}")
    ax.set_xlabel("finish time (s)")
    ax.set_ylabel("cumulative output tokens")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def draw_ttft(ax, fin, groups, colors, slo, title):
    series = [("all", fin["ttft_s"].to_numpy(dtype="float64"), "black")] if len(groups) > 1 else []
    for (label, names), color in zip(groups, colors):
        series.append((label, fin.loc[fin["client"].isin(names), "ttft_s"].to_numpy(dtype="float64"),
                       color))
    if sp.plot_cdfs(ax, series, "TTFT", "s", title) and slo is not None:
        ax.axvline(slo, color="tab:red", ls="--", lw=1.2, label=f"SLO {sp.fmt(slo)} s")
        ax.legend(fontsize=7, loc="upper left", title="o p50   ^ p99", title_fontsize=7)


def draw(dirs, labels, slo, ratio, out):
    for d in dirs:
        sp.check_result_dir(d)
    runs = [sp.load_requests(d, REQUIRED) for d in dirs]
    fins = [sp.finished(r) for r in runs]
    groups = client_groups(fins)
    palette = plt.get_cmap("tab10").colors
    colors = [palette[i % len(palette)] if not label.startswith("other ") else "0.5"
              for i, (label, _) in enumerate(groups)]
    n = len(dirs)
    fig, axes = plt.subplots(2, n, figsize=(6.5 * n, 9), squeeze=False)
    for j, (label, run, fin) in enumerate(zip(labels, runs, fins)):
        arrivals = run["arrival_s"].to_numpy(dtype="float64")
        arrivals = arrivals[np.isfinite(arrivals)]
        last_arrival = float(arrivals.max()) if len(arrivals) else np.nan
        draw_service(axes[0][j], fin, groups, colors, last_arrival,
                     f"{label}: output tokens delivered per client", ratio)
        draw_ttft(axes[1][j], fin, groups, colors, slo, f"{label}: TTFT per client")
    if n > 1:  # the same scale in every run, so the service curves compare by eye
        top = max(a.get_ylim()[1] for a in axes[0])
        right = max(a.get_xlim()[1] for a in axes[0])
        for a in axes[0]:
            if a.lines:
                a.set_ylim(0, top)
                a.set_xlim(0, right)
    fig.suptitle(sp.runs_title("Clients", labels, dirs, runs), fontsize=11, wrap=True)
    fig.tight_layout()
    return [sp.save(fig, sp.out_dir(out, dirs[0]), "clients.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sp.add_run_arguments(parser)
    parser.add_argument("--ttft-slo", type=float, metavar="SECONDS",
                        help="draw this TTFT target on the TTFT panels")
    parser.add_argument("--ratio", action="store_true",
                        help="title each service panel with max / min client tokens by the "
                             "last arrival (for clients meant to get equal service)")
    parser.add_argument("--out", metavar="DIR", help="output folder (default DIR1/plots)")
    args = parser.parse_args(argv)
    labels = sp.run_labels(args.dirs, args.labels)
    if args.ttft_slo is not None and not (np.isfinite(args.ttft_slo) and args.ttft_slo > 0):
        raise sp.InputError(f"--ttft-slo must be a positive number of seconds, "
                            f"not {args.ttft_slo}")
    return draw(args.dirs, labels, args.ttft_slo, args.ratio, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
