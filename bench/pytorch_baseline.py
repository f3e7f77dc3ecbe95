#!/usr/bin/env python3
"""PyTorch DTensor `redistribute` baseline, measured the way reshard's sweep measures itself.

Run under torchrun with one process per GPU:
    torchrun --nproc-per-node 2 bench/pytorch_baseline.py --cases cases.json --out pytorch.json

cases.json: a list of {"mesh": [2], "from": "S0", "to": "S1", "shape": [16384, 16384], "dtype": "f32"}
(placements: R, S<d>, P). For each case: distribute_tensor with the source placements, warm up, then time
`iters` calls of redistribute (CUDA events around each call, the rank's local result waited for; the slowest
rank's time per iteration, median over iterations), and count the wrong elements of every rank's result against
distribute_tensor(full, mesh, target). Output: one JSON object per case, same fields as `reshard run --json`.
"""
import argparse
import json
import os
import pathlib
import statistics
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python" / "gpu_tests"))
import common  # noqa: E402  (time_call: the timing reshard.torch's benchmark uses too)

DTYPES = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8}


def placement(text):
    text = text.strip()
    if text == "R":
        return Replicate()
    if text.startswith("P"):
        return Partial()
    if text.startswith("S"):
        return Shard(int(text[1:].strip("()")))
    raise ValueError(f"unknown placement {text}")


def full_tensor(shape, dtype, device="cuda"):
    # Small integers, exact in every dtype (as reshard's pattern).
    n = 1
    for s in shape:
        n *= s
    idx = torch.arange(n, device=device, dtype=torch.int64)
    vals = (idx * 7919 + 13) % 251 - 125
    return vals.to(dtype).reshape(shape)


def wait(t):
    return t.wait() if hasattr(t, "wait") else t


def run_case(case, meshes, iters, warmup):
    mesh_shape = tuple(case["mesh"])
    if mesh_shape not in meshes:
        meshes[mesh_shape] = init_device_mesh("cuda", mesh_shape)
    mesh = meshes[mesh_shape]
    src = [placement(p) for p in case["from"].split(",")]
    dst = [placement(p) for p in case["to"].split(",")]
    dtype = DTYPES[case["dtype"]]
    full = full_tensor(case["shape"], dtype)
    dt = distribute_tensor(full, mesh, src)
    expected = distribute_tensor(full, mesh, dst).to_local()
    per_iter, out = common.time_call(lambda: wait(dt.redistribute(mesh, dst).to_local()), iters, warmup)
    wrong = int((out != expected).sum().item()) if out.shape == expected.shape else expected.numel()
    stats = torch.tensor([float(wrong)], device="cuda", dtype=torch.float64)
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    tensor_bytes = full.numel() * full.element_size()
    return {"mesh": list(mesh_shape), "from": case["from"], "to": case["to"], "global_shape": list(case["shape"]),
            "dtype": case["dtype"], "strategy": "pytorch", "backend": "pytorch", "ranks": dist.get_world_size(),
            "tensor_bytes": tensor_bytes, "median_us": statistics.median(per_iter), "iteration_us": per_iter,
            "wrong_elements": int(stats.item()), "torch": torch.__version__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    with open(args.cases) as f:
        cases = json.load(f)
    meshes, results = {}, []
    for case in cases:
        results.append(run_case(case, meshes, args.iters, args.warmup))
        if dist.get_rank() == 0:
            r = results[-1]
            print(f"pytorch {r['mesh']} {r['from']}->{r['to']} {r['global_shape']} {r['dtype']}: "
                  f"{r['median_us']:.1f} us, wrong {r['wrong_elements']}", flush=True)
    if dist.get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
