#!/usr/bin/python3
"""Draws the standard per-run figures: latency_cdf.png and timeline.png.

usage: all.py RESULT_DIR [--out DIR]   (default DIR: RESULT_DIR/plots)
Every figure is attempted; the exit status is 2 if any input was bad.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")

import latency_cdf  # noqa: E402
import servelab_plots as sp  # noqa: E402
import timeline  # noqa: E402

SCRIPTS = [latency_cdf, timeline]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result_dir", metavar="RESULT_DIR")
    parser.add_argument("--out", metavar="DIR", help="output folder (default RESULT_DIR/plots)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        sp.check_result_dir(args.result_dir)
    except sp.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    status = 0
    for script in SCRIPTS:
        try:
            for path in script.draw(args.result_dir, args.out):
                print(path)
        except sp.InputError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
