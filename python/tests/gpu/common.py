"""Shared by the GPU checks and the benchmarks (python/bench, bench/pytorch_baseline.py), run under torchrun, one
process per GPU."""

import argparse
import datetime
import faulthandler
import json
import os
import pathlib
import sys

import torch
import torch.distributed as dist

PLACEMENT_KINDS = ["R", "S0", "S1", "P", "P(avg)"]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32, "c64": torch.complex64,
          "f16": torch.float16, "f64": torch.float64, "i64": torch.int64}


def setup():
    """Initialises torch.distributed (NCCL) on this process's GPU; returns (rank, world size)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    # A short timeout: a rank stuck in a collective ends the job instead of holding the GPUs for PyTorch's default.
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank), timeout=datetime.timedelta(seconds=180))
    # The same for reshard's own communicators (where reshard is there): a wait on a peer that never comes raises
    # within a minute.
    try:
        import reshard.torch as rt

        rt.configure(timeout_s=60.0)
    except ImportError:  # PyTorch's own baselines run without reshard
        pass
    # Where each rank is, on standard error, after every STACKS_EVERY_S seconds without an exit (a stuck job says where).
    text = os.environ.get("STACKS_EVERY_S", "0")
    try:
        every = float(text)
    except ValueError:
        every = -1.0
    if not 0 <= every <= 86400:
        raise SystemExit(f"STACKS_EVERY_S must be seconds from 0 (off) to 86400, not {text[:40]!r}")
    if every > 0:
        faulthandler.dump_traceback_later(every, repeat=True)
    return dist.get_rank(), dist.get_world_size()


def start(**counts):
    """Parses --out DIR and, for each keyword, a count --NAME (see positive) with the keyword's value as its default;
    initialises torch.distributed (setup) and a 1-D device mesh over every rank. Returns (args, rank, world size,
    mesh)."""
    from torch.distributed.device_mesh import init_device_mesh

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    for name, default in counts.items():
        ap.add_argument(f"--{name}", type=positive, default=default)
    args = ap.parse_args()
    rank, world = setup()
    return args, rank, world, init_device_mesh("cuda", (world,))


def finish(out_dir, name, report):
    """Writes `report` as DIR/name (rank 0), then waits for every rank and ends the process group."""
    write_json(out_dir, name, report)
    dist.barrier()
    dist.destroy_process_group()


def placement(text):
    from torch.distributed.tensor import Partial, Replicate, Shard

    if text == "R":
        return Replicate()
    if text.startswith("S"):
        return Shard(int(text[1:]))
    if text == "P":
        return Partial()
    return Partial(text[2:-1])


def time_call(fn, iters, warmup):
    """Times `iters` calls of fn after `warmup` untimed ones, each as DTensor programs see it: the ranks meet at a
    barrier, the GPU is idle, CUDA events are recorded around the call, the host waits. Returns the slowest rank's
    time of each iteration (us) and the last call's result."""
    out = None
    for _ in range(warmup):
        out = fn()
    torch.cuda.synchronize()
    return _timed(fn, iters, 1, out)


def time_loop(fn, iters, calls):
    """Times `iters` iterations of `calls` back-to-back calls of fn (as a training step issues them: the host never
    waits between calls, so one call's host work overlaps the previous call's GPU work). Returns the slowest rank's
    time per call of each iteration (us) and the last call's result."""
    out = fn()
    torch.cuda.synchronize()
    return _timed(fn, iters, calls, out)


def _timed(fn, iters, calls, out):
    # Per iteration: the ranks meet at a barrier, CUDA events around `calls` calls, the host waits; the slowest rank's
    # time per call.
    times = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            out = fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / calls)
    t = torch.tensor(times, device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist(), out


def make_global(shape, dtype, seed, bound=64):
    """The same tensor on every rank: integers in [-bound, bound), exact in every dtype."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    if dtype.is_complex:
        real = torch.randint(-bound, bound, shape, generator=g, device="cuda", dtype=torch.int32)
        imag = torch.randint(-bound, bound, shape, generator=g, device="cuda", dtype=torch.int32)
        return torch.complex(real.float(), imag.float()).to(dtype)
    return torch.randint(-bound, bound, shape, generator=g, device="cuda", dtype=torch.int32).to(dtype)


def exact_bound(world):
    """Values in [-b, b) for globals and Partial contributions such that every partial sum over the world's
    contributions (each a global value plus a rank's noise, |x| < 2b) stays below 128 in magnitude: exact in bf16 (8
    significant bits) in any order of summation, so PyTorch's order and reshard's give the same bits."""
    return max(1, 128 // (2 * world))


def random_like_global(shape, dtype, seed):
    """Random normal values (gradients), the same on every rank."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, device="cuda", dtype=dtype)
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


def local_of(full, mesh, placements, seed, rank_noise):
    """This rank's local tensor of `full` placed on `mesh`: Shard slices as torch.chunk, Partial contributions that
    differ per rank (rank_noise: a function (shape, seed) -> tensor). Ranks that differ only in their coordinates on
    Replicate mesh dims get the same contribution: a Replicate placement holds equal data on those ranks, and a
    redistribution may read any of them (noise per global rank made [P,R] sources inconsistent on mesh (2,2), so
    results depended on which replica a plan read)."""
    try:
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        shape, offset = compute_local_shape_and_global_offset(full.shape, mesh, placements)
    except ImportError:  # PyTorch moved it: reshard's layout (checked against PyTorch's in the CPU suite)
        import reshard
        from reshard.torch import _layout

        text = _layout.placements_text(placements, full.ndim)
        position = mesh.mesh.flatten().tolist().index(dist.get_rank())
        entry = reshard.layout(list(mesh.mesh.shape), text, list(full.shape))["ranks"][position]
        shape, offset = entry["local_shape"], entry["global_offset"]
    local = full[tuple(slice(o, o + s) for o, s in zip(offset, shape))]
    if any(p.is_partial() for p in placements):
        key = 0  # the rank's place among the replicas' classes: its coordinates on the mesh dims that are not Replicate
        for c, p, n in zip(mesh.get_coordinate(), placements, mesh.mesh.shape):
            key = key * n + (0 if p.is_replicate() else c)
        local = local + rank_noise(tuple(shape), seed * 131 + key)
    return local.contiguous()


def same_bits(a, b):
    """Bitwise equality of two local tensors (shape, dtype and every byte)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.contiguous(), b.contiguous()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def all_ranks_true(flag):
    t = torch.tensor([1 if flag else 0], device="cuda", dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def write_json(out_dir, name, obj):
    if dist.get_rank() != 0:
        return
    path = pathlib.Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / name, "w") as f:
        json.dump(obj, f, indent=1)


def log(*args):
    if dist.get_rank() == 0:
        print(*args, flush=True)


def versions():
    import reshard
    import reshard.torch  # noqa: F401
    from reshard import _cuda

    return {"torch": torch.__version__, "torch_nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "reshard": reshard.__version__, "reshard_nccl": _cuda.nccl_version(), "python": sys.version.split()[0],
            "gpus": dist.get_world_size(), "gpu": torch.cuda.get_device_name()}


def positive(text):
    """An argparse type for counts (iterations, calls, steps): a whole number from 1 to 100,000."""
    value = int(text)
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 100000, not {value}")
    return value
