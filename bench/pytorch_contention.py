#!/usr/bin/env python3
"""PyTorch DTensor `redistribute` beside a GEMM loop, measured the way `reshard contention` measures itself.

Run under torchrun with one process per GPU:
    torchrun --nproc-per-node 2 bench/pytorch_contention.py [--cases cases.json] [--out pytorch_contention.json]

cases.json: a list of {"mesh": [2], "from": "S0", "to": "S1", "shape": [16384, 16384], "dtype": "f32",
"gemm": "8192x8192x8192:bf16"} (placements R, S<d>, P; "gemm" optional, default --gemm). Without --cases: the one
case of the overlap acceptance, 1 GiB f32 S0 -> S1 on mesh (2) beside a bf16 8192^3 GEMM loop.

Method (docs/benchmarks.md, "Redistribution beside compute"), as `reshard contention`: on every GPU the redistribution
is issued on one stream and torch.matmul (out= a fixed C) on another. After a verified first run and a warm-up, a
calibration times G GEMMs and 5 redistributions alone and fixes R, the redistributions per loop, so that R
redistributions alone take about as long as G GEMMs (the largest rank's R). Each repeat then has three phases, each
after a barrier with both GPUs idle: G GEMMs alone; R redistributions alone; both enqueued interleaved in proportion
(the i-th GEMM after the first i * R / G redistributions), each stream bracketed by its own torch.cuda.Event pair;
the last result of phase 3 is compared element by element with distribute_tensor(full, mesh, target). Per repeat the
slowest rank's time per GEMM (loop / G) and per redistribution (loop / R) counts; the figures are medians over the
repeats, and slowdown = beside / alone - 1.

Output: one JSON line per case on stdout, starting {"strategy": "pytorch", with `reshard contention --json`'s field
names and units (microseconds), and --out holding {"rows": [...]} as `reshard contention --json` writes it.
"""
import argparse
import json
import math
import os
import statistics

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor

from pytorch_baseline import DTYPES, full_tensor, placement, wait

GEMM_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
CALIBRATION_RUNS = 5
MAX_REDISTRIBUTIONS_PER_LOOP = 100000
ACCEPTANCE_CASE = {"mesh": [2], "from": "S0", "to": "S1", "shape": [16384, 16384], "dtype": "f32"}


def parse_gemm(text):
    """'MxNxK[:dtype]' -> (m, n, k, dtype name), as `reshard contention --gemm`."""
    dims, _, name = text.partition(":")
    name = name or "bf16"
    parts = dims.split("x")
    if len(parts) != 3 or name not in GEMM_DTYPES:
        raise ValueError(f"--gemm '{text}' must be MxNxK[:dtype] with dtype bf16, f16 or f32")
    m, n, k = (int(p) for p in parts)
    if min(m, n, k) < 1:
        raise ValueError(f"--gemm '{text}': every extent must be >= 1")
    return m, n, k, name


def slowest(samples):
    """Per repeat the largest value over the ranks."""
    t = torch.tensor(samples, device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def agree_max(value):
    return slowest([float(value)])[0]


def idle_barrier():
    """Every rank got here and its GPU is idle (each phase starts from the same point on every rank)."""
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()


class Case:
    def __init__(self, case, meshes, gemm_text):
        mesh_shape = tuple(case["mesh"])
        if mesh_shape not in meshes:
            meshes[mesh_shape] = init_device_mesh("cuda", mesh_shape)
        self.case = case
        self.mesh = meshes[mesh_shape]
        self.src = [placement(p) for p in case["from"].split(",")]
        self.dst = [placement(p) for p in case["to"].split(",")]
        full = full_tensor(case["shape"], DTYPES[case["dtype"]])
        self.tensor_bytes = full.numel() * full.element_size()
        self.dt = distribute_tensor(full, self.mesh, self.src)
        self.expected = distribute_tensor(full, self.mesh, self.dst).to_local()
        del full
        self.gemm_text = case.get("gemm", gemm_text)
        m, n, k, name = parse_gemm(self.gemm_text)
        g = torch.Generator(device="cuda")
        g.manual_seed(1234 + dist.get_rank())
        dtype = GEMM_DTYPES[name]
        self.a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
        self.b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
        self.c = torch.empty(m, n, device="cuda", dtype=dtype)
        self.gemm_stream = torch.cuda.Stream()
        self.run_stream = torch.cuda.Stream()
        self.out = None
        torch.cuda.synchronize()

    def gemm(self):
        with torch.cuda.stream(self.gemm_stream):
            torch.matmul(self.a, self.b, out=self.c)

    def redistribute(self):
        with torch.cuda.stream(self.run_stream):
            self.out = wait(self.dt.redistribute(self.mesh, self.dst).to_local())

    def wrong(self):
        """Waits for the redistribution stream; this rank's elements that differ from the expected tensor."""
        self.run_stream.synchronize()
        if self.out is None or self.out.shape != self.expected.shape:
            return self.expected.numel()
        return int((self.out != self.expected).sum().item())

    def time_loop(self, stream, count, work):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(count):
            work()
        stop.record(stream)
        stop.synchronize()
        return start.elapsed_time(stop) * 1000.0

    def time_both(self, gemms, runs):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        events[0].record(self.gemm_stream)
        events[1].record(self.run_stream)
        g = r = 0
        while g < gemms or r < runs:
            if r >= runs or (g < gemms and g * runs <= r * gemms):
                self.gemm()
                g += 1
            else:
                self.redistribute()
                r += 1
        events[2].record(self.gemm_stream)
        events[3].record(self.run_stream)
        events[2].synchronize()
        events[3].synchronize()
        return events[0].elapsed_time(events[2]) * 1000.0, events[1].elapsed_time(events[3]) * 1000.0

    def measure(self, gemms, repeats, warmup):
        wrong = checked = 0
        self.redistribute()
        wrong += self.wrong()
        checked += self.expected.numel()
        self.gemm()
        for _ in range(warmup):
            self.redistribute()
            self.gemm()
        idle_barrier()
        gemm_loop = self.time_loop(self.gemm_stream, gemms, self.gemm)
        idle_barrier()
        run_us = self.time_loop(self.run_stream, CALIBRATION_RUNS, self.redistribute) / CALIBRATION_RUNS
        wanted = min(max(math.ceil(gemm_loop / max(run_us, 1e-3)), 1), MAX_REDISTRIBUTIONS_PER_LOOP)
        runs = int(agree_max(wanted))  # every rank must run the same number of collectives
        s = {k: [] for k in ("gemm_alone", "gemm_beside", "run_alone", "run_beside", "gemm_loop", "run_loop")}
        for _ in range(repeats):
            idle_barrier()
            s["gemm_alone"].append(self.time_loop(self.gemm_stream, gemms, self.gemm) / gemms)
            idle_barrier()
            s["run_alone"].append(self.time_loop(self.run_stream, runs, self.redistribute) / runs)
            self.out = None
            idle_barrier()
            gemm_span, run_span = self.time_both(gemms, runs)
            s["gemm_loop"].append(gemm_span)
            s["run_loop"].append(run_span)
            s["gemm_beside"].append(gemm_span / gemms)
            s["run_beside"].append(run_span / runs)
            wrong += self.wrong()
            checked += self.expected.numel()
        return s, runs, wrong, checked

    def row(self, gemms, repeats, warmup):
        s, runs, wrong, checked = self.measure(gemms, repeats, warmup)
        slow = {k: slowest(v) for k, v in s.items()}
        med = {k: statistics.median(v) for k, v in slow.items()}
        totals = torch.tensor([float(wrong), float(checked)], device="cuda", dtype=torch.float64)
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        c = self.case
        return {
            "strategy": "pytorch", "transport": "pytorch", "mesh": "x".join(str(d) for d in c["mesh"]),
            "from": c["from"], "to": c["to"], "shape": "x".join(str(d) for d in c["shape"]), "dtype": c["dtype"],
            "cuda_graph": False, "low_sm": False, "tensor_bytes": self.tensor_bytes, "gemm": self.gemm_text,
            "gemms_per_loop": gemms, "redistributions_per_loop": runs, "repeats": repeats,
            "gemm_alone_us": med["gemm_alone"], "gemm_beside_us": med["gemm_beside"],
            "gemm_slowdown": med["gemm_beside"] / med["gemm_alone"] - 1 if med["gemm_alone"] > 0 else 0.0,
            "redistribution_alone_us": med["run_alone"], "redistribution_beside_us": med["run_beside"],
            "redistribution_slowdown": med["run_beside"] / med["run_alone"] - 1 if med["run_alone"] > 0 else 0.0,
            "gemm_loop_beside_us": med["gemm_loop"], "redistribution_loop_beside_us": med["run_loop"],
            "gemm_alone_samples_us": slow["gemm_alone"], "gemm_beside_samples_us": slow["gemm_beside"],
            "redistribution_alone_samples_us": slow["run_alone"],
            "redistribution_beside_samples_us": slow["run_beside"],
            "wrong": int(totals[0].item()), "checked": int(totals[1].item()), "ranks": dist.get_world_size(),
            "torch": torch.__version__,
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", help="JSON list of cases (default: the 1 GiB f32 S0->S1 acceptance case)")
    ap.add_argument("--out", help="write {\"rows\": [...]} here (rank 0)")
    ap.add_argument("--gemm", default="8192x8192x8192:bf16", help="GEMM MxNxK[:dtype] of cases that name none")
    ap.add_argument("--iters", type=int, default=50, help="GEMMs per loop (G)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats of the three phases (>= 5; medians over them)")
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if args.repeats < 5 or args.iters < 1 or args.warmup < 0:
        ap.error("--repeats must be >= 5, --iters >= 1 and --warmup >= 0")
    parse_gemm(args.gemm)
    cases = [ACCEPTANCE_CASE]
    if args.cases:
        with open(args.cases) as f:
            cases = json.load(f)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)  # barriers and collectives on this rank's GPU
    meshes, rows = {}, []
    for case in cases:
        row = Case(case, meshes, args.gemm).row(args.iters, args.repeats, args.warmup)
        rows.append(row)
        if dist.get_rank() == 0:
            print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    if dist.get_rank() == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    dist.destroy_process_group()
    if any(r["wrong"] for r in rows):
        raise SystemExit(f"{sum(r['wrong'] for r in rows)} wrong elements")


if __name__ == "__main__":
    main()
