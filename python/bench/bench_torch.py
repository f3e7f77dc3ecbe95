"""reshard.torch against PyTorch's DTensor.redistribute, from Python, in the same run (torch.cuda.Event timings).

    torchrun --nproc-per-node 2 python/bench/bench_torch.py --out DIR

Cases: mesh (2) (and (2,2) on 4 GPUs), S0->S1, S0->R, R->S0, R->S1, P->R, P->S0 for f32 1024x1024 (4 MiB) and f32 16384x16384
(1 GiB) (--sizes; also 4096x4096, 64 MiB, and 8192x8192, 256 MiB), and S0->S1 in bf16 at each size (--cases all: every
ordered pair of R, S0, S1, P that changes, to R, S0 or S1, f32); --profile: reshard's cost-model profile.
Each call is timed as DTensor programs see it, Python overhead included: ranks meet at a barrier, the GPU is idle, a CUDA event is recorded, the call is made, a second event is recorded, the
host waits; the time of an iteration is the slowest rank's, the median over iterations is reported. A second measure
times 10 back-to-back calls per iteration (as a training step issues them: one call's host work overlaps the last
one's GPU work; the barrier's skew between ranks is spread over the 10) and reports the time per call. Four variants
per case: DTensor.redistribute (PyTorch), reshard.torch.redistribute, the same with configure(transport="nccl") (no
one-sided plans, so no per-call mapping of the peers' tensors: the difference prices that mapping), and
DTensor.redistribute with reshard.torch.enable(). Every result is compared with PyTorch's, every element. Then the tensor-parallel MLP of
python/examples/tp_mlp.py: median step time (forward, backward, SGD step) with and without enable(), eager (and
compiled with --compile-mlp). Results: DIR/bench.json and a table on stdout.
"""

import argparse
import itertools
import pathlib
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402
import tp_mlp  # noqa: E402

CASES = [("S0", "S1"), ("S0", "R"), ("R", "S0"), ("R", "S1"), ("P", "R"), ("P", "S0")]
PLACEMENTS = ("R", "S0", "S1", "P")
TARGETS = ("R", "S0", "S1")  # DTensor.redistribute refuses a Partial target
SIZES = {"4MiB": (1024, 1024), "64MiB": (4096, 4096), "256MiB": (8192, 8192), "1GiB": (16384, 16384)}
LARGE = ("256MiB", "1GiB")  # the sizes of the >= 1.5x target, timed over --iters


def time_call(fn, iters, warmup):
    """Median over iterations of the slowest rank's CUDA-event time of one call (us), and the last result."""
    times, out = common.time_call(fn, iters, warmup)
    return statistics.median(times), out


LOOP_CALLS = 10  # back-to-back calls per timed iteration of the loop measure


def time_loop(fn, iters):
    """Median over iterations of the slowest rank's time per call of LOOP_CALLS back-to-back calls (us)."""
    times, out = common.time_loop(fn, iters, LOOP_CALLS)
    return statistics.median(times), out


def bench_redistribute(mesh, mesh_shape, src, dst, dtype_name, shape, iters, warmup):
    dtype = common.DTYPES[dtype_name]
    src_p = [common.placement(t) for t in src.split(",")]
    dst_p = [common.placement(t) for t in dst.split(",")]
    bound = common.exact_bound(dist.get_world_size())  # Partial sums exact in any order: bitwise comparable
    full = common.make_global(shape, dtype, 3, bound)
    local = common.local_of(full, mesh, src_p, 3, lambda s, sd: common.make_global(s, dtype, sd, bound))
    x = DTensor.from_local(local, mesh, src_p, shape=full.shape, stride=full.stride())
    variants = {
        "pytorch": lambda: x.redistribute(mesh, dst_p),
        "reshard": lambda: rt.redistribute(x, mesh, dst_p),
    }
    row = {"mesh": list(mesh_shape), "from": src, "to": dst, "dtype": dtype_name, "shape": list(shape),
           "tensor_bytes": full.numel() * full.element_size()}
    results = {}
    with torch.no_grad():
        for name, fn in variants.items():
            row[f"{name}_us"], out = time_call(fn, iters, warmup)
            results[name] = out.to_local()
            row[f"{name}_loop_us"], _ = time_loop(fn, max(3, iters // 3))
        # The same on the two-sided NCCL transport: one-sided plans map the peers' tensors on every call from Python
        # (a host all-gather), two-sided ones do not; the difference is that mapping's cost.
        rt.configure(transport="nccl")
        try:
            row["reshard_nccl_us"], out = time_call(variants["reshard"], iters, warmup)
            results["reshard_nccl"] = out.to_local()
        finally:
            rt.configure(transport="auto")
        rt.enable()
        try:
            row["enabled_us"], out = time_call(variants["pytorch"], iters, warmup)
            results["enabled"] = out.to_local()
        finally:
            rt.disable()
    row["reshard_equal"] = common.all_ranks_true(common.same_bits(results["pytorch"], results["reshard"]))
    row["enabled_equal"] = common.all_ranks_true(common.same_bits(results["pytorch"], results["enabled"])
                                                 and common.same_bits(results["pytorch"], results["reshard_nccl"]))
    row["speedup"] = row["pytorch_us"] / row["reshard_us"]
    row["speedup_loop"] = row["pytorch_loop_us"] / row["reshard_loop_us"]
    row["speedup_enabled"] = row["pytorch_us"] / row["enabled_us"]
    rt.clear_cache()
    return row


def bench_tp_mlp(mesh, steps, warmup, compiled):
    rows = {}
    for name in ("pytorch", "reshard"):
        torch._dynamo.reset()
        if name == "reshard":
            rt.enable()
        model = tp_mlp.build(mesh)
        step_fn = torch.compile(model) if compiled else None
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        batches = itertools.cycle([tp_mlp.batch(i, 8, 1024, 1024) for i in range(2)])  # two batches, alternating

        def step():
            out = (model if step_fn is None else step_fn)(next(batches))  # (a compiled module has no truth value)
            out.float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        rows[f"{name}_step_us"], _ = time_call(step, steps, warmup)
        rt.disable()
    rows["speedup"] = rows["pytorch_step_us"] / rows["reshard_step_us"]
    return rows


def sizes_arg(text):
    """--sizes: names of SIZES, comma-separated (argparse's usage error otherwise)."""
    names = [t for t in text.split(",") if t]
    unknown = [t for t in names if t not in SIZES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"sizes must be of {', '.join(SIZES)}, got {text!r}")
    return names


def cases_arg(text):
    """--cases: "default" (CASES, then S0->S1 in bf16), "all" (every ordered pair of R, S0, S1, P that changes, f32,
    but for targets P, which DTensor.redistribute refuses) or pairs like "S1->R,P->S1" (f32)."""
    if text == "default":
        return [(s, d, "f32") for s, d in CASES] + [("S0", "S1", "bf16")]
    if text == "all":
        return [(s, d, "f32") for s, d in itertools.product(PLACEMENTS, TARGETS) if s != d]
    pairs = []
    for item in (t for t in text.split(",") if t):
        src, sep, dst = item.partition("->")
        if not sep or src not in PLACEMENTS or dst not in TARGETS:
            raise argparse.ArgumentTypeError(f"cases must be default, all or pairs like S1->R from {', '.join(PLACEMENTS)} "
                                             f"to {', '.join(TARGETS)}, got {item!r}")
        pairs.append((src, dst, "f32"))
    if not pairs:
        raise argparse.ArgumentTypeError("cases must name at least one pair")
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=common.positive, default=30,
                    help="timed iterations of the cases of 256 MiB and more")
    ap.add_argument("--iters-small", type=common.positive, default=150,
                    help="timed iterations of the 4 MiB cases (their per-call times vary most from one to the next)")
    ap.add_argument("--warmup", type=common.positive, default=5)
    ap.add_argument("--compile-mlp", action="store_true", help="also time the TP MLP under torch.compile")
    ap.add_argument("--sizes", default="4MiB,1GiB", type=sizes_arg,
                    help=f"comma-separated sizes of the redistributions, of {', '.join(SIZES)} (default 4MiB,1GiB)")
    ap.add_argument("--cases", default="default", type=cases_arg,
                    help="default (S0->S1, S0->R, R->S0, R->S1, P->R, P->S0, and S0->S1 in bf16), all (every ordered "
                    "pair of R, S0, S1, P that changes, to R, S0 or S1) or pairs like S1->R,P->S1")
    ap.add_argument("--profile", default="", help="reshard's cost-model profile JSON (configure(profile=...)); "
                    "default: the built-in one")
    ap.add_argument("--ranks-per-node", type=common.positive, default=None,
                    help="ranks per node for reshard's plans (configure(ranks_per_node=...)), as under a two-node "
                    "emulation on one host (scripts/device/two_nodes.sh); default: LOCAL_WORLD_SIZE")
    args = ap.parse_args()
    rank, world = common.setup()
    if args.ranks_per_node:
        rt.configure(ranks_per_node=args.ranks_per_node)
    if args.profile:
        try:  # a profile reshard refuses is a usage error, in one line
            rt.configure(profile=args.profile)
        except ValueError as e:
            ap.error(f"--profile: {e}")
    t0 = time.time()
    mesh_shapes = [(world,)] + ([(2, world // 2)] if world >= 4 else [])
    rows = []
    for mesh_shape in mesh_shapes:
        mesh = init_device_mesh("cuda", mesh_shape)
        for size_name in args.sizes:
            shape = SIZES[size_name]
            for src, dst, dtype_name in args.cases:
                if len(mesh_shape) == 2:
                    src, dst = f"{src},{src}", f"{dst},{dst}"
                iters = args.iters if size_name in LARGE else args.iters_small
                row = bench_redistribute(mesh, mesh_shape, src, dst, dtype_name, shape, iters, args.warmup)
                row["size"] = size_name
                rows.append(row)
                common.log(f"{mesh_shape} {src}->{dst} {dtype_name} {size_name}: PyTorch {row['pytorch_us']:.1f} us, "
                           f"reshard {row['reshard_us']:.1f} us ({row['speedup']:.2f}x), enable() "
                           f"{row['enabled_us']:.1f} us ({row['speedup_enabled']:.2f}x), transport nccl "
                           f"{row['reshard_nccl_us']:.1f} us; back to back: PyTorch {row['pytorch_loop_us']:.1f} us, "
                           f"reshard {row['reshard_loop_us']:.1f} us ({row['speedup_loop']:.2f}x); "
                           f"equal {row['reshard_equal'] and row['enabled_equal']}")
    mesh = init_device_mesh("cuda", (world,))
    mlp = {"eager": bench_tp_mlp(mesh, 20, 3, compiled=False)}
    if args.compile_mlp:
        mlp["compile"] = bench_tp_mlp(mesh, 20, 3, compiled=True)
    for mode, r in mlp.items():
        common.log(f"TP MLP step ({mode}): PyTorch {r['pytorch_step_us']:.1f} us, with enable() "
                   f"{r['reshard_step_us']:.1f} us ({r['speedup']:.2f}x)")
    small = [r["speedup"] for r in rows if r["size"] == "4MiB"]
    large = [r["speedup"] for r in rows if r["size"] in LARGE]
    small_loop = [r["speedup_loop"] for r in rows if r["size"] == "4MiB"]
    large_loop = [r["speedup_loop"] for r in rows if r["size"] in LARGE]
    summary = {
        "versions": common.versions(),
        "method": "median of per-iteration slowest-rank CUDA-event time around one call, after a barrier and an idle "
                  "GPU, Python overhead included; *_loop_us: the same around LOOP_CALLS back-to-back calls, per call",
        "loop_calls": LOOP_CALLS,
        "iters": {"256MiB and 1GiB": args.iters, "others": args.iters_small},
        "profile": args.profile or "built-in",
        "ranks_per_node": args.ranks_per_node,
        "redistribute": rows,
        "tp_mlp": mlp,
        "all_equal": all(r["reshard_equal"] and r["enabled_equal"] for r in rows),
        "min_speedup_4MiB": min(small) if small else None,
        "min_speedup_large": min(large) if large else None,
        "min_speedup_4MiB_loop": min(small_loop) if small_loop else None,
        "min_speedup_large_loop": min(large_loop) if large_loop else None,
        "targets": {"4MiB": ">= 5x", "256MiB and 1GiB": ">= 1.5x"},
        "seconds": time.time() - t0,
    }
    common.write_json(args.out, "bench.json", summary)
    common.log({k: summary[k] for k in ("all_equal", "min_speedup_4MiB", "min_speedup_large", "min_speedup_4MiB_loop",
                                        "min_speedup_large_loop", "seconds")})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
