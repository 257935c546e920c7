"""The calibration table from experiments/calibration/run.sh's fits.

    python3 summary.py RESULTS_DIR     (results/calibration: one folder per fit)

Reads each fit's calibration.json (servelab calibrate) and prints markdown: per-layer MAPE
by TP degree in sample (each GEMM row corrected from its shape's other rows, never its
own), on held-out rows and on profiles the fit never saw, with the form alone beside it;
then decode and prefill attention. Each row says whether the issue's target holds.
"""
import json
import os
import sys


def load(results, fit):
    path = os.path.join(results, fit, "calibration.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"summary.py: {path}: {e} (run.sh writes it)")


def by_tp(stats):
    return " / ".join(f"{stats[tp]['mape']:.2f}" for tp in sorted(stats, key=int))


def evaluation(calibration, needle):
    for e in calibration["evaluations"]:
        if needle in e["file"]:
            return e
    raise KeyError(f"no evaluation of a file matching {needle!r}")


def layer_row(label, e, leave_one_out, target):
    """One per-layer row: the model's figure (leave-one-out in sample), the form's."""
    if leave_one_out:
        total, tps = e["total_leave_one_out"], e["total_leave_one_out_by_tp"]
    else:
        total, tps = e["total"], e["total_by_tp"]
    verdict = ""
    if target is not None:
        worst_tp = max(s["mape"] for s in tps.values()) if tps else total["mape"]
        bound = total["mape"] if target[1] == "total" else worst_tp
        verdict = f"≤ {target[0]:g}%: " + ("met" if bound <= target[0] else "**missed**")
    return (f"| {label} | {total['mape']:.2f}% ({by_tp(tps)}) | {total['max_error']:.1f}% | "
            f"{e['mape_total_form']:.2f}% ({by_tp(e['total_form_by_tp'])}) | {verdict} |")


def attention_row(label, e, target):
    ops = e["ops"]
    cells, met = [], True
    for op in ("attention_decode", "attention_prefill"):
        s = ops.get(op)
        if s is None:
            cells.append("—")
            continue
        cells.append(f"{s['mape']:.2f}% (bias {s['bias']:+.1f}%)")
        met = met and s["mape"] <= target if target is not None else met
    verdict = "" if target is None else f"each ≤ {target:g}%: " + ("met" if met else "**missed**")
    return f"| {label} | {cells[0]} | {cells[1]} | {verdict} |"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py RESULTS_DIR")
    results = sys.argv[1]
    a100_7b = load(results, "a100_7b")
    h100_7b = load(results, "h100_7b")
    a100_8b = load(results, "a100_8b")
    short = load(results, "a100_7b_short")
    attention = load(results, "attention")
    attention_short = load(results, "attention_short")
    lines = [
        "Per-layer MAPE (an (shape, tokens, TP) configuration's ops summed, predicted against",
        "measured), by TP 1 / 2 / 4 / 8; in sample each GEMM row corrected from its shape's",
        "other rows, never its own; elsewhere the model as the simulator runs it.",
        "",
        "| fit → evaluated on | per-layer MAPE (by TP) | worst | the form alone | target |",
        "|---|---|---|---|---|",
        layer_row("A100 Llama-2-7B, in sample", a100_7b["files"][0], True, (3, "tp")),
        layer_row("H100 Llama-2-7B, in sample", h100_7b["files"][0], True, (3, "tp")),
        layer_row("A100 Llama-3-8B, in sample", a100_8b["files"][0], True, (3, "tp")),
        layer_row("A100 Llama-2-7B, fit on ≤ 2,048 tokens → the rows above",
                  evaluation(short, "held out"), False, None),
        layer_row("A100 Llama-2-7B → A100 Llama-3-8B", evaluation(a100_7b, "Meta-Llama-3-8B"),
                  False, (8, "total")),
        layer_row("A100 Llama-2-7B → H100 Llama-2-7B", evaluation(a100_7b, "h100"), False, None),
        layer_row("H100 Llama-2-7B → A100 Llama-2-7B", evaluation(h100_7b, "a100"), False, None),
        "",
        "Attention, A100 Llama-2-70B at TP 2 (contexts up to 2k):",
        "",
        "| fit → evaluated on | decode | prefill | target |",
        "|---|---|---|---|",
        attention_row("in sample", attention["files"][0], 5),
        attention_row("fit on contexts ≤ 1,024 → longer ones",
                      evaluation(attention_short, "held out"), None),
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
