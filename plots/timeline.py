#!/usr/bin/python3
"""Per-iteration timeline of one run: batch size, tokens per step, KV cache use,
waiting queue and preemptions over time, one line per replica.

usage: timeline.py RESULT_DIR [--out DIR]   (default DIR: RESULT_DIR/plots)
Reads RESULT_DIR/steps.csv; writes timeline.png. Long runs are binned by time into
at most 2000 points per replica: solid lines are the mean per bin, faint lines
the max per bin.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

import servelab_plots as sp  # noqa: E402

REQUIRED = ["replica", "start_s", "batch_size", "prefill_tokens", "decode_tokens",
            "kv_blocks_used", "kv_blocks_total", "waiting", "preempted"]
VALUES = ["batch_size", "prefill_tokens", "decode_tokens", "kv_pct", "waiting", "preempted"]


def _mean_max(ax, t, stats, col, color, scaled=1.0):
    ax.plot(t, stats[(col, "max")] * scaled, color=color, lw=0.8, alpha=0.3)
    ax.plot(t, stats[(col, "mean")] * scaled, color=color, lw=1.2)


def draw(result_dir, out):
    sp.check_result_dir(result_dir)
    steps = sp.load_steps(result_dir, REQUIRED)
    total = steps["kv_blocks_total"].where(steps["kv_blocks_total"] > 0)
    steps["kv_pct"] = (100.0 * steps["kv_blocks_used"] / total).astype("float32")
    binned, width = sp.bin_by_time(steps, "start_s", VALUES)
    # Prefill tokens come in bursts (a chunk, then nothing): per-bin means are noise,
    # so that panel shows a moving average over 1% of the run.
    span = float(steps["start_s"].max() - steps["start_s"].min()) if len(steps) else 0.0
    smooth_s = max(span / 100, width)

    fig, axes = plt.subplots(5, 1, figsize=(12, 14), sharex=True)
    ax_batch, ax_tok, ax_kv, ax_wait, ax_pre = axes
    titles = ["Batch size (requests per step)", "Tokens per step" + (f" (moving average over {smooth_s:.3g} s)" if smooth_s else ""),
              "KV cache blocks used (% of total)", "Waiting queue length (requests)",
              "Cumulative preemptions"]
    ylabels = ["requests", "tokens / step", "KV used (%)", "requests", "preemptions"]
    for ax, title, ylabel in zip(axes, titles, ylabels):
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    colors = plt.get_cmap("tab10").colors
    if not binned:
        for ax in axes:
            sp.no_data(ax)
    for i, (rep, stats) in enumerate(binned.items()):
        c = colors[i % len(colors)]
        t = stats.index.to_numpy()
        _mean_max(ax_batch, t, stats, "batch_size", c)
        ax_tok.plot(t, sp.rolling_mean(stats, "decode_tokens", smooth_s), color=c, lw=1.2)
        ax_tok.plot(t, sp.rolling_mean(stats, "prefill_tokens", smooth_s), color=c, lw=1.2,
                    ls="--")
        _mean_max(ax_kv, t, stats, "kv_pct", c)
        _mean_max(ax_wait, t, stats, "waiting", c)
        ax_pre.plot(t, stats[("preempted", "sum")].cumsum(), color=c, lw=1.2,
                    drawstyle="steps-post")
    if binned:
        reps = [Line2D([], [], color=colors[i % len(colors)], lw=2, label=f"replica {r}")
                for i, r in enumerate(binned)]
        # Legends sit in the title row, right-aligned, so they never hide data.
        above = dict(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax_batch.legend(handles=reps, ncol=min(len(reps), 8), **above)
        ax_tok.legend(handles=[Line2D([], [], color="0.2", lw=1.2, label="decode"),
                               Line2D([], [], color="0.2", lw=1.2, ls="--", label="prefill")],
                      ncol=2, **above)
        ax_kv.axhline(100, color="0.5", lw=0.8, ls=":")
        ax_kv.set_ylim(0, 105)
        for ax in (ax_batch, ax_tok, ax_wait, ax_pre):
            ax.set_ylim(bottom=0)
    ax_pre.set_xlabel("time since start of run (s)")
    how = (f"binned into {width:.3g} s bins: solid = mean per bin, faint = max per bin"
           if width else "one point per step")
    fig.suptitle(f"{sp.run_name(result_dir)}: timeline  ({len(steps):,} steps; {how})",
                 fontsize=12)
    fig.tight_layout()
    return [sp.save(fig, sp.out_dir(out, result_dir), "timeline.png")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result_dir", metavar="RESULT_DIR")
    parser.add_argument("--out", metavar="DIR", help="output folder (default RESULT_DIR/plots)")
    args = parser.parse_args(argv)
    return draw(args.result_dir, args.out)


if __name__ == "__main__":
    sys.exit(sp.run_main(main))
