#!/usr/bin/python3
"""Tests for plots/: run as `/usr/bin/python3 plots/test_plots.py` (unittest only).

Each test writes tiny result folders into a temp dir, runs the scripts as
subprocesses (as a user would) and checks their PNGs, exit status and messages.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import servelab_plots as sp  # noqa: E402

REQUEST_HEADER = ("id,client,replica,status,reject_reason,arrival_s,first_token_s,finish_s,"
                  "input_tokens,output_tokens,ttft_s,e2e_s,tpot_s,queue_s,preemptions")
STEP_HEADER = ("replica,start_s,duration_s,batch_size,prefill_tokens,decode_tokens,"
               "kv_blocks_used,kv_blocks_total,waiting,preempted")


def write_run(directory, n_requests=40, n_steps=300, clients=("alice", "bob"),
              all_rejected=False, drop_column=None):
    """A small but plausible run: two clients, two replicas, a few rejections."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(7)
    rows = [REQUEST_HEADER]
    for i in range(n_requests):
        client = clients[i % len(clients)]
        arrival = 0.5 * i
        if all_rejected or i % 10 == 9:
            rows.append(f"{i},{client},,rejected,exceeds_kv_capacity,{arrival},,,5000,100,,,,,0")
            continue
        queue = 0.0 if i % 3 == 0 else float(rng.lognormal(-2, 1))
        ttft = queue + float(rng.lognormal(-3, 0.5))
        out = int(rng.integers(1, 200))
        tpot = float(rng.lognormal(np.log(0.03), 0.2)) if out > 1 else None
        e2e = ttft + (tpot or 0.0) * (out - 1)
        rows.append(f"{i},{client},{i % 2},finished,,{arrival},{arrival + ttft},"
                    f"{arrival + e2e},{int(rng.integers(10, 900))},{out},{ttft},{e2e},"
                    f"{'' if tpot is None else tpot},{queue},{int(i % 7 == 0)}")
    steps = [STEP_HEADER]
    for k in range(0 if all_rejected else n_steps):
        batch = int(rng.integers(1, 32))
        steps.append(f"{k % 2},{0.1 * k},0.02,{batch},{int(rng.integers(0, 512)) * (k % 5 == 0)},"
                     f"{batch},{int(rng.integers(0, 1024))},1024,{int(rng.integers(0, 9))},"
                     f"{int(k % 50 == 0)}")
    for name, lines in (("requests.csv", rows), ("steps.csv", steps)):
        header = lines[0].split(",")
        if drop_column in header:  # remove that column from every line
            j = header.index(drop_column)
            lines = [",".join(c for n, c in enumerate(l.split(",")) if n != j) for l in lines]
        with open(os.path.join(directory, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(directory, "summary.json"), "w") as f:
        f.write('{"name": "%s"}\n' % os.path.basename(directory))
    return directory


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(HERE, script), *args],
                          capture_output=True, text=True, timeout=300)


def tree_digest(directory):
    """{relative path: sha256} of every file, to show a run's files are left alone."""
    digest = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digest[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return digest


class PlotTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="servelab_plots_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assertPng(self, path):
        self.assertTrue(os.path.isfile(path), path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", path)
        self.assertGreater(os.path.getsize(path), 5000, path)

    def assertOk(self, result):
        self.assertEqual(result.returncode, 0, result.stderr)


class ScriptTest(PlotTestCase):
    def test_latency_cdf_writes_png_and_prints_its_path(self):
        d = write_run(os.path.join(self.tmp, "run"))
        r = run("latency_cdf.py", d)
        self.assertOk(r)
        png = os.path.join(d, "plots", "latency_cdf.png")
        self.assertEqual(r.stdout.split(), [png])
        self.assertPng(png)

    def test_timeline_honours_out(self):
        d = write_run(os.path.join(self.tmp, "run"))
        out = os.path.join(self.tmp, "figs")
        r = run("timeline.py", d, "--out", out)
        self.assertOk(r)
        self.assertPng(os.path.join(out, "timeline.png"))
        self.assertFalse(os.path.exists(os.path.join(d, "plots")))

    def test_timeline_downsamples_many_steps(self):
        d = write_run(os.path.join(self.tmp, "run"), n_steps=9000)
        r = run("timeline.py", d)
        self.assertOk(r)
        self.assertPng(os.path.join(d, "plots", "timeline.png"))

    def test_all_draws_both_and_leaves_results_alone(self):
        d = write_run(os.path.join(self.tmp, "run"))
        before = tree_digest(d)
        r = run("all.py", d)
        self.assertOk(r)
        pngs = [os.path.join(d, "plots", n) for n in ("latency_cdf.png", "timeline.png")]
        self.assertEqual(r.stdout.split(), pngs)
        for p in pngs:
            self.assertPng(p)
        after = {k: v for k, v in tree_digest(d).items() if not k.startswith("plots")}
        self.assertEqual(after, before)

    def test_single_client_run(self):
        d = write_run(os.path.join(self.tmp, "run"), clients=("only",))
        self.assertOk(run("all.py", d))

    def test_compare_with_labels(self):
        a = write_run(os.path.join(self.tmp, "a"))
        b = write_run(os.path.join(self.tmp, "b"), n_requests=25)
        out = os.path.join(self.tmp, "cmp")
        r = run("compare.py", a, b, "--labels", "fcfs,vtc", "--out", out)
        self.assertOk(r)
        self.assertPng(os.path.join(out, "compare.png"))

    def test_compare_label_count_mismatch_is_exit_2(self):
        a = write_run(os.path.join(self.tmp, "a"))
        r = run("compare.py", a, "--labels", "x,y")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--labels", r.stderr)


class EmptyDataTest(PlotTestCase):
    def test_all_rejected_run_still_draws(self):
        d = write_run(os.path.join(self.tmp, "rejected"), all_rejected=True)
        r = run("all.py", d)
        self.assertOk(r)
        for n in ("latency_cdf.png", "timeline.png"):
            self.assertPng(os.path.join(d, "plots", n))
        ok = write_run(os.path.join(self.tmp, "ok"))
        r = run("compare.py", ok, d, "--out", os.path.join(self.tmp, "cmp"))
        self.assertOk(r)
        self.assertPng(os.path.join(self.tmp, "cmp", "compare.png"))

    def test_header_only_csvs_draw_no_data(self):
        d = os.path.join(self.tmp, "empty")
        os.makedirs(d)
        with open(os.path.join(d, "requests.csv"), "w") as f:
            f.write(REQUEST_HEADER + "\n")
        with open(os.path.join(d, "steps.csv"), "w") as f:
            f.write(STEP_HEADER + "\n")
        r = run("all.py", d)
        self.assertOk(r)
        self.assertPng(os.path.join(d, "plots", "timeline.png"))


class BadInputTest(PlotTestCase):
    def test_missing_request_column_is_exit_2_naming_it(self):
        d = write_run(os.path.join(self.tmp, "run"), drop_column="ttft_s")
        for script in ("latency_cdf.py", "compare.py", "all.py"):
            r = run(script, d)
            self.assertEqual(r.returncode, 2, script)
            self.assertIn("ttft_s", r.stderr, script)
            self.assertIn("requests.csv", r.stderr, script)

    def test_missing_step_column_is_exit_2_naming_it(self):
        d = write_run(os.path.join(self.tmp, "run"), drop_column="kv_blocks_total")
        r = run("timeline.py", d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("kv_blocks_total", r.stderr)
        self.assertIn("steps.csv", r.stderr)

    def test_missing_file_is_exit_2_and_all_still_draws_the_rest(self):
        d = write_run(os.path.join(self.tmp, "run"))
        os.remove(os.path.join(d, "steps.csv"))
        r = run("all.py", d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("steps.csv", r.stderr)
        self.assertPng(os.path.join(d, "plots", "latency_cdf.png"))

    def test_missing_folder_is_exit_2(self):
        r = run("latency_cdf.py", os.path.join(self.tmp, "nope"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("nope", r.stderr)

    def test_non_number_is_exit_2_naming_column_and_line(self):
        d = write_run(os.path.join(self.tmp, "run"))
        path = os.path.join(d, "requests.csv")
        with open(path) as f:
            lines = f.read().splitlines()
        cells = lines[2].split(",")
        cells[REQUEST_HEADER.split(",").index("e2e_s")] = "oops"
        lines[2] = ",".join(cells)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = run("latency_cdf.py", d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("e2e_s", r.stderr)
        self.assertIn("line 3", r.stderr)


class SaveTest(PlotTestCase):
    def test_a_failed_figure_leaves_the_earlier_one_whole(self):
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        path = sp.save(fig, self.tmp, "f.png")
        self.assertPng(path)
        with open(path, "rb") as f:
            earlier = f.read()
        fig, ax = plt.subplots()

        def fail_half_way(target, **kwargs):  # writes part of a file, then fails
            with open(target, "wb") as f:
                f.write(b"\x89PNG half")
            raise OSError("disk full")

        fig.savefig = fail_half_way
        with self.assertRaises(OSError):
            sp.save(fig, self.tmp, "f.png")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), earlier)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["f.png"])  # no partial file left


class HelperTest(unittest.TestCase):
    def test_output_throughput_hand_computed(self):
        df = pd.DataFrame({
            "status": ["finished", "finished", "rejected"],
            "arrival_s": [1.0, 3.0, 0.0],
            "finish_s": [11.0, 6.0, np.nan],
            "output_tokens": [100.0, 50.0, 1000.0]})
        # (100 + 50) tokens / (11 - 1) s; the rejected row counts for nothing.
        self.assertAlmostEqual(sp.output_throughput(df), 15.0)
        self.assertEqual(sp.output_throughput(df[df.status == "rejected"]), 0.0)

    def test_binning_bounds_points_and_conserves_max_sum_mean(self):
        rng = np.random.default_rng(1)
        n = 25000
        df = pd.DataFrame({
            "replica": pd.Categorical(rng.integers(0, 2, n).astype(str)),
            "start_s": np.sort(rng.uniform(0, 600, n)),
            "batch_size": rng.integers(1, 100, n).astype("float32")})
        binned, width = sp.bin_by_time(df, "start_s", ["batch_size"], max_points=2000)
        self.assertAlmostEqual(width, (df.start_s.max() - df.start_s.min()) / 2000)
        self.assertEqual(sorted(binned), ["0", "1"])
        for rep, stats in binned.items():
            rows = df[df.replica == rep].batch_size
            self.assertLessEqual(len(stats), 2000)
            self.assertEqual(stats[("batch_size", "max")].max(), rows.max())
            self.assertEqual(stats[("batch_size", "sum")].sum(), rows.sum())
            self.assertEqual(stats[("batch_size", "count")].sum(), len(rows))

    def test_few_steps_are_not_binned(self):
        df = pd.DataFrame({"replica": pd.Categorical(["0", "0", "1"]),
                           "start_s": [0.0, 1.0, 0.5], "batch_size": [1.0, 2.0, 3.0]})
        binned, width = sp.bin_by_time(df, "start_s", ["batch_size"])
        self.assertEqual(width, 0.0)
        self.assertEqual(list(binned["0"][("batch_size", "mean")]), [1.0, 2.0])

    def test_replicas_sort_numerically(self):
        self.assertEqual(sp.replica_order(["10", "2", "1"]), ["1", "2", "10"])

SWEEP_HEADER = ("workload.input_tokens.value,hardware.gpu.pcie_gbps,scheduler.preemption,folder,"
                "status,finished,output_throughput,e2e_mean_s,preemptions")


def write_sweep(path, extra_axis_values=None, failed=()):
    """A 2 x 3 x 2 sweep.csv (context x PCIe x mode), as `servelab sweep` writes one."""
    rows = [SWEEP_HEADER]
    for ctx in (1000, 16000):
        for pcie in (4, 16, 64):
            for mode in ("recompute", "swap"):
                folder = f"value-{ctx}_pcie_gbps-{pcie}_preemption-{mode}"
                status = "failed" if folder in failed else "ok"
                tput = 1000.0 / (1 + ctx / 1000) * (1 + (0.01 * pcie if mode == "swap" else 0.2))
                rows.append(f"{ctx},{pcie},{mode},{folder},{status},200,{tput},{1e5 / tput},12")
    if extra_axis_values:  # a fourth axis that varies: prepend it to every row
        rows = ["policy," + rows[0]] + [f"{extra_axis_values[i % len(extra_axis_values)]},{r}"
                                         for i, r in enumerate(rows[1:])]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    return path


class PolicyFigureTest(PlotTestCase):
    """clients.py, by_length.py and sweep.py (the experiments/policies figures)."""

    def test_clients_draws_service_and_ttft_per_client(self):
        a = write_run(os.path.join(self.tmp, "fcfs"))
        b = write_run(os.path.join(self.tmp, "vtc"), n_requests=25)
        before = tree_digest(a)
        out = os.path.join(self.tmp, "figs")
        r = run("clients.py", a, b, "--labels", "FCFS,VTC", "--ttft-slo", "0.5", "--ratio",
                "--out", out)
        self.assertOk(r)
        self.assertEqual(r.stdout.split(), [os.path.join(out, "clients.png")])
        self.assertPng(os.path.join(out, "clients.png"))
        self.assertEqual(tree_digest(a), before)

    def test_clients_folds_many_clients_and_draws_empty_runs(self):
        many = write_run(os.path.join(self.tmp, "many"), n_requests=60,
                         clients=tuple(f"c{i}" for i in range(11)))
        rejected = write_run(os.path.join(self.tmp, "rejected"), all_rejected=True)
        r = run("clients.py", many, rejected)
        self.assertOk(r)
        self.assertPng(os.path.join(many, "plots", "clients.png"))

    def test_clients_bad_input_is_exit_2(self):
        d = write_run(os.path.join(self.tmp, "run"), drop_column="finish_s")
        r = run("clients.py", d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("finish_s", r.stderr)
        self.assertIn("requests.csv", r.stderr)
        ok = write_run(os.path.join(self.tmp, "ok"))
        r = run("clients.py", ok, "--labels", "x,y")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--labels", r.stderr)
        r = run("clients.py", ok, "--ttft-slo", "-1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--ttft-slo", r.stderr)

    def test_by_length_with_edges_and_default_quartiles(self):
        a = write_run(os.path.join(self.tmp, "fcfs"))
        b = write_run(os.path.join(self.tmp, "sjf"), n_requests=30)
        out = os.path.join(self.tmp, "figs")
        r = run("by_length.py", a, b, "--labels", "FCFS,SJF", "--edges", "20,100", "--out", out)
        self.assertOk(r)
        self.assertPng(os.path.join(out, "by_length.png"))
        r = run("by_length.py", a, b)
        self.assertOk(r)
        self.assertPng(os.path.join(a, "plots", "by_length.png"))
        rejected = write_run(os.path.join(self.tmp, "rejected"), all_rejected=True)
        self.assertOk(run("by_length.py", rejected, a, "--out", out))

    def test_by_length_bad_input_is_exit_2(self):
        d = write_run(os.path.join(self.tmp, "run"))
        for edges in ("100,50", "a,b", "0,10"):
            r = run("by_length.py", d, "--edges", edges)
            self.assertEqual(r.returncode, 2, edges)
            self.assertIn("--edges", r.stderr, edges)
        missing = write_run(os.path.join(self.tmp, "missing"), drop_column="output_tokens")
        r = run("by_length.py", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn("output_tokens", r.stderr)

    def test_sweep_draws_series_and_panels_from_csv_or_folder(self):
        csv = write_sweep(os.path.join(self.tmp, "sw", "sweep.csv"),
                          failed=("value-1000_pcie_gbps-4_preemption-swap",))
        r = run("sweep.py", csv, "--x", "hardware.gpu.pcie_gbps", "--series",
                "scheduler.preemption", "--panels", "workload.input_tokens.value", "--logx",
                "--metrics", "output_throughput,e2e_mean_s,preemptions")
        self.assertOk(r)
        self.assertEqual(r.stdout.split(), [os.path.join(self.tmp, "sw", "sweep.png")])
        self.assertPng(os.path.join(self.tmp, "sw", "sweep.png"))
        out = os.path.join(self.tmp, "figs")
        r = run("sweep.py", os.path.join(self.tmp, "sw"), "--x", "scheduler.preemption",
                "--series", "hardware.gpu.pcie_gbps", "--panels",
                "workload.input_tokens.value", "--out", out)
        self.assertOk(r)  # a categorical x axis
        self.assertPng(os.path.join(out, "sweep.png"))

    def test_sweep_compare_csv_with_one_axis(self):
        path = os.path.join(self.tmp, "cmp", "compare.csv")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write("scheduler.policy,folder,status,output_throughput,e2e_mean_s\n"
                    "fcfs,fcfs,ok,100,5\nsjf,sjf,ok,101,3\n")
        r = run("sweep.py", os.path.dirname(path))
        self.assertOk(r)
        self.assertPng(os.path.join(self.tmp, "cmp", "sweep.png"))

    def test_calibration_points_per_op(self):
        path = os.path.join(self.tmp, "cal", "calibration_points.csv")
        os.makedirs(os.path.dirname(path))
        rows = ["kind,file,op,tokens,batch,context,tp,measured_ms,predicted_ms"]
        for kind in ("fit", "evaluate"):
            for op in ("qkv_proj", "rope"):
                for tp in (1, 8):
                    for tokens in (1, 16, 256, 4096):
                        t = (0.01 + tokens * 1e-4) / tp
                        rows.append(f"{kind},a.csv,{op},{tokens},1,0,{tp},{t},{t * 1.05}")
        with open(path, "w") as f:
            f.write("\n".join(rows) + "\n")
        r = run("calibration.py", path)
        self.assertOk(r)
        self.assertEqual(r.stdout.split(), [os.path.join(self.tmp, "cal", "calibration.png")])
        self.assertPng(os.path.join(self.tmp, "cal", "calibration.png"))
        # With the form's and the leave-one-out predictions (a GEMM corrected; a blank
        # leave-one-out is the prediction's).
        rows = ["kind,file,op,tokens,batch,context,tp,measured_ms,predicted_ms,form_ms,"
                "leave_one_out_ms"]
        for tokens in (1, 16, 256, 4096):
            t = 0.01 + tokens * 1e-4
            rows.append(f"fit,a.csv,qkv_proj,{tokens},1,0,1,{t},{t},{t * 1.1},{t * 1.02}")
            rows.append(f"fit,a.csv,rope,{tokens},1,0,1,{t},{t},{t},")
        with open(path, "w") as f:
            f.write("\n".join(rows) + "\n")
        self.assertOk(run("calibration.py", path))
        self.assertPng(os.path.join(self.tmp, "cal", "calibration.png"))
        with open(path, "w") as f:
            f.write("kind,op\nfit,rope\n")
        r = run("calibration.py", path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing column", r.stderr)

    def test_validation_overlays_engine_and_simulator_per_load(self):
        v = os.path.join(self.tmp, "val")
        for load in ("rate-1", "rate-2"):
            write_run(os.path.join(v, load, "engine"))
            write_run(os.path.join(v, load, "sim"))
            with open(os.path.join(v, load, "steps_compared.csv"), "w") as f:
                f.write("tokens,seqs,decode_only,measured_ms,predicted_ms\n"
                        "1,1,1,2.0,2.1\n64,3,0,20.0,19.0\n4,4,1,5.0,5.5\n")
        write_run(os.path.join(v, "rate-2", "run-2", "engine"))  # --engine-runs 2
        before = tree_digest(v)
        r = run("validation.py", v, "rate-1", "--out", os.path.join(self.tmp, "v.png"), "rate-2")
        self.assertOk(r)
        self.assertPng(os.path.join(self.tmp, "v.png"))
        self.assertEqual(tree_digest(v), before)
        r = run("validation.py", v, "rate-3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("rate-3", r.stderr)
        # A further run is read as the first is: one without its results is bad input.
        os.makedirs(os.path.join(v, "rate-1", "run-3"))
        r = run("validation.py", v, "rate-1", "--out", os.path.join(self.tmp, "v.png"))
        self.assertEqual(r.returncode, 2)
        self.assertIn(os.path.join("run-3", "engine"), r.stderr)

    def test_sweep_bad_input_is_exit_2(self):
        csv = write_sweep(os.path.join(self.tmp, "sw", "sweep.csv"))
        cases = [
            (["--x", "hardware.gpu.pcie_gbps", "--series", "scheduler.preemption"],
             "workload.input_tokens.value"),  # a varying axis left unassigned
            (["--x", "nope"], "nope"),
            (["--x", "hardware.gpu.pcie_gbps", "--series", "scheduler.preemption", "--panels",
              "workload.input_tokens.value", "--metrics", "tput"], "tput"),
            (["--x", "scheduler.preemption", "--series", "hardware.gpu.pcie_gbps", "--panels",
              "workload.input_tokens.value", "--logx"], "--logx"),
        ]
        for args, needle in cases:
            r = run("sweep.py", csv, *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(needle, r.stderr, args)
        r = run("sweep.py", os.path.join(self.tmp, "empty_folder_that_is_missing"))
        self.assertEqual(r.returncode, 2)
        with open(csv) as f:
            lines = f.read().splitlines()
        lines[3] = lines[3].replace(",12", ",twelve")
        with open(csv, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = run("sweep.py", csv, "--x", "hardware.gpu.pcie_gbps", "--series",
                "scheduler.preemption", "--panels", "workload.input_tokens.value",
                "--metrics", "preemptions")
        self.assertEqual(r.returncode, 2)
        self.assertIn("preemptions", r.stderr)
        self.assertIn("line 4", r.stderr)


class PolicyFigureHelperTest(unittest.TestCase):
    def test_cumulative_service_and_tokens_by_hand_computed(self):
        import clients
        fin = pd.DataFrame({"client": ["a", "b", "a", "a"], "finish_s": [3.0, 1.0, 1.0, 5.0],
                            "output_tokens": [10.0, 7.0, 4.0, 1.0]})
        times, cum = clients.cumulative_service(fin, ["a"])
        self.assertEqual(list(times), [1.0, 3.0, 5.0])
        self.assertEqual(list(cum), [4.0, 14.0, 15.0])
        self.assertEqual(clients.tokens_by(times, cum, 0.5), 0.0)
        self.assertEqual(clients.tokens_by(times, cum, 3.0), 14.0)  # a finish at t counts
        self.assertEqual(clients.tokens_by(times, cum, 99), 15.0)
        groups = clients.client_groups([fin], max_series=1)
        self.assertEqual(groups, [("a", ["a"]), ("other 1 clients", ["b"])])

    def test_length_buckets_hand_computed(self):
        import by_length
        edges = [50.0, 200.0]
        self.assertEqual(list(by_length.bucket_index(np.array([1, 50, 51, 200, 201, 5000]),
                                                     edges)), [0, 0, 1, 1, 2, 2])
        self.assertEqual(by_length.bucket_labels(edges), ["≤50", "51–200", ">200"])
        self.assertEqual(by_length.quartile_edges(np.arange(1.0, 101.0)), [26.0, 50.0, 75.0])
        self.assertEqual(by_length.quartile_edges(np.full(10, 7.0)), [])
        self.assertEqual(by_length.bucket_labels([]), ["all"])


class PrefixCacheFigureTest(PlotTestCase):
    """prefix_cache.py: runs with scheduler.prefix_cache on carry cached_tokens columns."""

    def with_cached_tokens(self, directory):
        for name, rate in (("requests.csv", 3), ("steps.csv", 2)):
            path = os.path.join(directory, name)
            with open(path) as f:
                lines = f.read().splitlines()
            out = [lines[0] + ",cached_tokens"]
            out += [f"{l},{(i % rate) * 16}" for i, l in enumerate(lines[1:])]
            with open(path, "w") as f:
                f.write("\n".join(out) + "\n")
        return directory

    def test_prefix_cache_draws_hit_rate_and_prefill_split(self):
        a = self.with_cached_tokens(write_run(os.path.join(self.tmp, "hash")))
        b = self.with_cached_tokens(write_run(os.path.join(self.tmp, "radix"), n_requests=20))
        before = tree_digest(a)
        out = os.path.join(self.tmp, "figs")
        r = run("prefix_cache.py", a, b, "--labels", "hash,radix", "--bins", "10", "--out", out)
        self.assertOk(r)
        self.assertPng(os.path.join(out, "prefix_cache.png"))
        self.assertEqual(tree_digest(a), before)

    def test_prefix_cache_without_the_column_is_exit_2_naming_it(self):
        r = run("prefix_cache.py", write_run(os.path.join(self.tmp, "off")))
        self.assertEqual(r.returncode, 2)
        self.assertIn("cached_tokens", r.stderr)
        r = run("prefix_cache.py", write_run(os.path.join(self.tmp, "x")), "--bins", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--bins", r.stderr)

    def test_hit_rate_by_time_hand_computed(self):
        import prefix_cache
        requests = pd.DataFrame({"status": ["finished"] * 4 + ["rejected"],
                                 "arrival_s": [0.0, 1.0, 9.0, 9.5, 5.0],
                                 "queue_s": [0.0, 0.0, 1.0, 0.5, np.nan],
                                 "input_tokens": [100.0, 100.0, 50.0, 150.0, 999.0],
                                 "cached_tokens": [0.0, 50.0, 40.0, 60.0, 0.0]})
        # Admissions at 0, 1, 10, 10 -> two bins over [0, 10]: 50/200, 100/200.
        t, rate = prefix_cache.hit_rate_by_time(requests, 2)
        self.assertEqual(list(t), [2.5, 7.5])
        self.assertEqual(list(rate), [0.25, 0.5])



class PlanFigureTest(PlotTestCase):
    """plan.py: the Pareto view of `servelab plan`."""

    def test_pareto_front_by_hand(self):
        sys.path.insert(0, HERE)
        import plan
        x = np.array([10.0, 20.0, 30.0, 15.0, 30.0])
        y = np.array([900.0, 600.0, 200.0, 500.0, 100.0])
        # (15, 500) is beaten by (20, 600); (30, 100) by (30, 200).
        self.assertEqual(plan.pareto_front(x, y), [0, 1, 2])

    def test_plan_draws_and_bad_input_is_exit_2(self):
        path = os.path.join(self.tmp, "plan.csv")
        with open(path, "w") as f:
            f.write("hardware.tensor_parallel,candidate,status,gpus,max_rate,"
                    "output_tok_s_per_gpu,output_tok_s_per_user\n"
                    "1,tp-1,ok,1,12.5,2500,40\n2,tp-2,ok,2,30,3000,55\n"
                    "4,tp-4,failed,4,,,\n8,tp-8,ok,8,0,,\n")
        r = run("plan.py", self.tmp)
        self.assertOk(r)
        self.assertEqual(r.stdout.split(), [os.path.join(self.tmp, "plan.png")])
        self.assertPng(os.path.join(self.tmp, "plan.png"))
        with open(path, "w") as f:
            f.write("candidate,status,max_rate\ntp-1,ok,1\n")
        r = run("plan.py", path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("output_tok_s_per_user", r.stderr)

if __name__ == "__main__":
    unittest.main(verbosity=1)
