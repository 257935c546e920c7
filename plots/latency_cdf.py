#!/usr/bin/python3
"""Empirical CDFs of TTFT, TPOT, E2E latency and queueing delay of one run.

usage: latency_cdf.py RESULT_DIR [--out DIR]   (default DIR: RESULT_DIR/plots)
Reads RESULT_DIR/requests.csv (finished rows); writes latency_cdf.png.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["client", "status", "ttft_s", "tpot_s", "e2e_s", "queue_s"]
# (column, title, axis label, unit, scale from seconds)
METRICS = [
    ("ttft_s", "Time to first token (TTFT)", "TTFT", "s", 1.0),
    ("tpot_s", "Time per output token (TPOT)", "TPOT", "ms", 1e3),
    ("e2e_s", "End-to-end latency (E2E)", "E2E latency", "s", 1.0),
    ("queue_s", "Queueing delay", "queueing delay", "s", 1.0),
]


def draw(result_dir, out):
    sp.check_result_dir(result_dir)
    requests = sp.load_requests(result_dir, REQUIRED)
    fin = sp.finished(requests)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    for ax, (col, title, xlabel, unit, scale) in zip(axes.flat, METRICS):
        sp.plot_cdfs(ax, sp.split_by_client(fin, col, scale), xlabel, unit, title)
    fig.suptitle(f"{sp.run_name(result_dir)}: latency CDFs  "
                 f"({sp.status_counts(requests)})", fontsize=13)
    fig.tight_layout()
    return [sp.save(fig, sp.out_dir(out, result_dir), "latency_cdf.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result_dir", metavar="RESULT_DIR")
    parser.add_argument("--out", metavar="DIR", help="output folder (default RESULT_DIR/plots)")
    args = parser.parse_args(argv)
    return draw(args.result_dir, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
