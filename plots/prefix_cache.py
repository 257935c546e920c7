#!/usr/bin/python3
"""Prefix cache over time: hit rate per run, and one run's prefill computed vs cached.

usage: prefix_cache.py DIR1 DIR2 ... [--labels a,b,...] [--bins N] [--out DIR]
       (default DIR: DIR1/plots)
Each DIR must come from a run with scheduler.prefix_cache on (requests.csv and steps.csv
then have a cached_tokens column). Left: the token hit rate of the requests admitted in
each time bin (sum of cached_tokens / sum of input_tokens, admission = arrival + queue),
one line per run. Right, for DIR1: prompt tokens per second computed (steps.csv
prefill_tokens) and taken from the cache (cached_tokens), stacked. Writes prefix_cache.png.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["status", "arrival_s", "queue_s", "input_tokens", "cached_tokens"]
STEP_REQUIRED = ["replica", "start_s", "prefill_tokens", "cached_tokens"]


def hit_rate_by_time(requests, bins):
    """(bin centres, hit rate per bin) over the finished requests' admission times."""
    fin = sp.finished(requests)
    t = (fin["arrival_s"] + fin["queue_s"].fillna(0)).to_numpy(dtype="float64")
    if not len(t):
        return np.array([]), np.array([])
    edges = np.linspace(t.min(), max(t.max(), t.min() + 1e-9), bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    cached = np.bincount(idx, fin["cached_tokens"].to_numpy(dtype="float64"), bins)
    queried = np.bincount(idx, fin["input_tokens"].to_numpy(dtype="float64"), bins)
    keep = queried > 0
    centres = (edges[:-1] + edges[1:]) / 2
    return centres[keep], cached[keep] / queried[keep]


def prefill_by_time(steps, bins):
    """(bin centres, width, computed tok/s, cached tok/s) over all replicas' steps."""
    t = steps["start_s"].to_numpy(dtype="float64")
    if not len(t):
        return np.array([]), 0.0, np.array([]), np.array([])
    edges = np.linspace(t.min(), max(t.max(), t.min() + 1e-9), bins + 1)
    width = edges[1] - edges[0]
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    computed = np.bincount(idx, steps["prefill_tokens"].to_numpy(dtype="float64"), bins)
    cached = np.bincount(idx, steps["cached_tokens"].to_numpy(dtype="float64"), bins)
    return (edges[:-1] + edges[1:]) / 2, width, computed / width, cached / width


def draw(dirs, labels, bins, out):
    for d in dirs:
        sp.check_result_dir(d)
    runs = [sp.load_requests(d, REQUIRED) for d in dirs]
    steps = sp.load_steps(dirs[0], STEP_REQUIRED)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5))
    left.set_title("prefix cache token hit rate, by admission time")
    drew = False
    for requests, label in zip(runs, labels):
        t, rate = hit_rate_by_time(requests, bins)
        if len(t):
            left.plot(t, rate * 100, lw=1.2, label=label)
            drew = True
    if drew:
        left.set_ylim(0, 100)
        left.set_xlabel("time (s)")
        left.set_ylabel("tokens from the cache (% of prompt tokens)")
        left.grid(True, alpha=0.3)
        left.legend(fontsize=8)
    else:
        sp.no_data(left)
    right.set_title(f"prompt tokens per second, {labels[0]}: computed vs cached")
    t, width, computed, cached = prefill_by_time(steps, bins)
    if len(t):
        right.bar(t, computed, width, color="tab:blue", label="computed (prefill)")
        right.bar(t, cached, width, bottom=computed, color="tab:green", label="from the cache")
        right.set_xlabel("time (s)")
        right.set_ylabel("tokens / s")
        right.grid(True, axis="y", alpha=0.3)
        right.legend(fontsize=8)
    else:
        sp.no_data(right)
    fig.suptitle(sp.runs_title("Prefix cache", labels, dirs, runs), fontsize=11, wrap=True)
    fig.tight_layout()
    return [sp.save(fig, sp.out_dir(out, dirs[0]), "prefix_cache.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sp.add_run_arguments(parser)
    parser.add_argument("--bins", type=int, default=60, help="time bins (default 60)")
    parser.add_argument("--out", metavar="DIR", help="output folder (default DIR1/plots)")
    args = parser.parse_args(argv)
    if not 1 <= args.bins <= 100000:
        raise sp.InputError(f"--bins must be in [1, 100000], not {args.bins}")
    labels = sp.run_labels(args.dirs, args.labels)
    return draw(args.dirs, labels, args.bins, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
