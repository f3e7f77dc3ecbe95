#!/usr/bin/env python3
"""Tests of bench/report.py's sweep reading and plotting. The plots are checked only where matplotlib is installed
(it is optional: CI machines may not have it)."""
import importlib.util
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("report", os.path.join(HERE, "..", "..", "bench", "report.py"))
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

HEADER = ("mesh,from,to,shape,dtype,strategy,auto_choice,tensor_bytes,max_rank_bytes,estimated_us,median_us,graph_us,"
          "algbw_GBps,busbw_GBps,bound_us,wrong,checked,workspace_bytes,steps,backend,iterations\n")
# A host sweep (no graph, no bound: empty fields) and a GPU one.
HOST = HEADER + "".join(
    f'2,"S0","S1",{s}x{s},f32,{st},{int(st == "p2p")},{4 * s * s},{2 * s * s},3.0,{t},,1.5,0.7,,0,{3 * s * s},0,p2p,host,20\n'
    for s, t in ((32, 10.0), (64, 20.0)) for st in ("collective", "p2p"))
GPU = HEADER + '2,"S0","R",32x32,bf16,collective,1,2048,1024,5.0,8.0,6.5,0.25,0.12,1.5,0,3072,0,all_gather,nccl,20\n'
# Before the backend and iterations columns, a CUDA-graph time not measured was written as 0.
OLD = ("mesh,from,to,shape,dtype,strategy,auto_choice,tensor_bytes,max_rank_bytes,estimated_us,median_us,graph_us,"
       "algbw_GBps,busbw_GBps,bound_us,wrong,checked,workspace_bytes,steps\n"
       '2,"S0","R",32x32,bf16,p2p,1,2048,1024,5.0,8.0,0.0,0.25,0.12,1.5,0,3072,0,p2p\n')


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class SweepReading(unittest.TestCase):
    def test_figures_that_do_not_apply_are_none(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = report.load_sweep(write(tmp, "host.csv", HOST))
            self.assertEqual(len(rows), 4)
            self.assertIsNone(rows[0]["graph_us"])
            self.assertIsNone(rows[0]["bound_us"])
            self.assertEqual(rows[0]["median_us"], 10.0)
            self.assertEqual(rows[1]["iterations"], 20)
            self.assertTrue(rows[1]["auto_choice"])
            old = report.load_sweep(write(tmp, "old.csv", OLD))
            self.assertIsNone(old[0]["graph_us"])
            self.assertEqual(old[0]["bound_us"], 1.5)

    def test_series_per_strategy_sorted_by_size(self):
        with tempfile.TemporaryDirectory() as tmp:
            series = report.sweep_series(report.load_sweep(write(tmp, "host.csv", HOST)))
            pair = series[("2", "f32")][("S0", "S1")]
            self.assertEqual(pair["p2p"], [(4 * 32 * 32 / report.MiB, 10.0), (4 * 64 * 64 / report.MiB, 20.0)])
            self.assertNotIn("lower bound", pair)  # host rows have none
            gpu = report.sweep_series(report.load_sweep(write(tmp, "gpu.csv", GPU)))[("2", "bf16")][("S0", "R")]
            self.assertEqual(gpu["lower bound"], [(2048 / report.MiB, 1.5)])
            self.assertEqual(gpu["auto (CUDA graph)"], [(2048 / report.MiB, 6.5)])

    def test_run_rows_before_and_after_the_graph_column(self):
        old = "  2      S0          S1          1024x1024       bf16  p2p   2097152   267.4   7.84   1.96   1.5   0.5%   20.0   0"
        new = "  2      S0         S1         1024x1024      bf16  p2p   2097152   267.4   -   7.84   1.96   -   -   20.0   0"
        self.assertEqual(report.run_row(old), ("p2p", 267.4, 20.0, 0))
        self.assertEqual(report.run_row(new), ("p2p", 267.4, 20.0, 0))


class SweepPlots(unittest.TestCase):
    def test_one_png_per_mesh_and_dtype(self):
        if importlib.util.find_spec("matplotlib") is None:
            self.skipTest("matplotlib is not installed")
        with tempfile.TemporaryDirectory() as tmp:
            paths = report.plot_sweep(write(tmp, "sweep.csv", HOST + GPU[len(HEADER):]), os.path.join(tmp, "png"))
            self.assertEqual(sorted(os.path.basename(p) for p in paths), ["sweep_mesh2_bf16.png", "sweep_mesh2_f32.png"])
            for p in paths:
                with open(p, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
