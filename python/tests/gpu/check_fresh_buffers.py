"""reshard.torch on the buffers real callers hand it: fresh tensors from PyTorch's caching allocator, the same tensor
again, blocks freed and reallocated (at the same address with another size, and after empty_cache() returned them to
the driver), and redistribute_many over mixed lists, forward and backward. Every element of every rank's result is
compared with DTensor.redistribute's, bit for bit.

    torchrun --nproc-per-node 4 python/tests/gpu/check_fresh_buffers.py [--out DIR]

Also under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or backend:cudaMallocAsync (memory the peers cannot map:
one-sided plans then run on their NCCL fallback, counted in stats()["fallback_runs"]). Exits 1 when any check fails.
"""

import argparse
import json
import os
import pathlib
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402

PAIRS = [("S0", "S1"), ("S1", "S0"), ("S0", "R"), ("R", "S1"), ("P", "S0"), ("P", "R"), ("S1", "S1")]
SHAPES = [(256, 384), (1000, 37), (4096, 1024), (3, 5, 7)]
DTYPES = [torch.float32, torch.bfloat16]


def dtensor(mesh, shape, dtype, src, seed):
    bound = common.exact_bound(dist.get_world_size())
    full = common.make_global(shape, dtype, seed, bound)
    placements = [common.placement(src)]
    local = common.local_of(full, mesh, placements, seed, lambda s, sd: common.make_global(s, dtype, sd, bound))
    return DTensor.from_local(local, mesh, placements, run_check=False, shape=full.shape, stride=full.stride())


def fresh(x):
    return DTensor.from_local(x.to_local().clone(), x.device_mesh, x.placements, run_check=False, shape=x.shape,
                              stride=x.stride())


class Checks:
    def __init__(self):
        self.passed = self.failed = 0
        self.failures = []

    def equal(self, what, got, want):
        self.ok(what, common.all_ranks_true(common.same_bits(got.to_local(), want.to_local())
                                            and got.placements == want.placements))

    def ok(self, what, ok):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(what)


def single_calls(mesh, checks):
    seed = 0
    for shape in SHAPES:
        for dtype in DTYPES:
            for src, dst in PAIRS:
                if src[0] == "S" and int(src[1:]) >= len(shape) or dst[0] == "S" and int(dst[1:]) >= len(shape):
                    continue
                seed += 1
                what = f"{src}->{dst} {list(shape)} {dtype}"
                target = [common.placement(dst)]
                x = dtensor(mesh, shape, dtype, src, seed)
                want = x.redistribute(mesh, target)
                for i in range(3):  # the same tensor again
                    checks.equal(f"{what} reused {i}", rt.redistribute(x, mesh, target), want)
                for i in range(3):  # fresh copies, the last results still held
                    held = rt.redistribute(fresh(x), mesh, target)
                    checks.equal(f"{what} fresh {i}", held, want)
                # Freed, then the same block taken by a tensor of another size; then returned to the driver and
                # allocated anew.
                x2 = fresh(x)
                ptr = x2.to_local().data_ptr()
                del x2, held
                other = torch.empty(max(1, x.to_local().numel() // 2 + 7), dtype=dtype, device="cuda")
                reused_block = other.data_ptr() == ptr
                checks.equal(f"{what} after a smaller tensor took the block ({reused_block})",
                             rt.redistribute(fresh(x), mesh, target), want)
                del other
                torch.cuda.empty_cache()
                checks.equal(f"{what} after empty_cache", rt.redistribute(fresh(x), mesh, target), want)


def many_calls(mesh, checks):
    xs, targets = [], []
    seed = 500
    for i, (src, dst) in enumerate(PAIRS * 3):
        shape = SHAPES[i % len(SHAPES)]
        if src[0] == "S" and int(src[1:]) >= len(shape) or dst[0] == "S" and int(dst[1:]) >= len(shape):
            continue
        seed += 1
        xs.append(dtensor(mesh, shape, DTYPES[i % 2], src, seed))
        targets.append([common.placement(dst)])
    wants = [x.redistribute(mesh, t) for x, t in zip(xs, targets)]
    for round_ in range(3):
        args = xs if round_ == 0 else [fresh(x) for x in xs]
        for j, (got, want) in enumerate(zip(rt.redistribute_many(args, targets), wants)):
            checks.equal(f"redistribute_many round {round_} member {j}", got, want)
    # Backward: the gradients moved back equal PyTorch's, member by member. Each output's gradient is a dense tensor of
    # distinct small integers (a misplaced element shows; a constant gradient would hide it), the same global tensor
    # sliced by the output's placements on every rank.
    leaves = [fresh(x).detach().requires_grad_(x.dtype.is_floating_point) for x in xs]
    theirs = [fresh(x).detach().requires_grad_(x.dtype.is_floating_point) for x in xs]
    outs = rt.redistribute_many(leaves, targets)
    ref = [x.redistribute(mesh, t) for x, t in zip(theirs, targets)]
    weights = [common.local_of(common.make_global(tuple(o.shape), torch.float32, 900 + k, 16), mesh, o.placements, 0,
                               None) for k, o in enumerate(outs)]
    sum((o.to_local().float() * w).sum() for o, w in zip(outs, weights)).backward()
    sum((o.to_local().float() * w).sum() for o, w in zip(ref, weights)).backward()
    for j, (a, b) in enumerate(zip(leaves, theirs)):
        if a.grad is not None or b.grad is not None:
            checks.equal(f"redistribute_many backward member {j}", a.grad, b.grad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rank, world = common.setup()
    mesh = init_device_mesh("cuda", (world,))
    checks = Checks()
    # Every check under the default settings, then with the nvlink transport forced and mapping priced free (so that
    # no plan stages its source): one-sided plans on the caller's tensors map them, or, from memory the peers cannot
    # map, run their NCCL fallback.
    profile = json.loads((pathlib.Path(__file__).resolve().parents[3] / "bench/profiles/h100x2.json").read_text())
    profile["nvlink"]["map_us"] = 0
    mapping_free = pathlib.Path(f"/tmp/reshard_mapping_free_{rank}.json")
    mapping_free.write_text(json.dumps(profile))
    for settings in ({"transport": "auto"}, {"transport": "nvlink", "profile": str(mapping_free)}):
        rt.configure(**settings)
        single_calls(mesh, checks)
        many_calls(mesh, checks)
    rt.configure(transport="auto", profile="")
    stats = rt.stats()
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    unmappable = "expandable_segments:True" in conf or "cudaMallocAsync" in conf
    checks.ok(f"fallback runs {stats['fallback_runs']} ({'some' if unmappable else 'none'} expected)",
              stats["fallback_runs"] > 0 if unmappable else stats["fallback_runs"] == 0)
    summary = {"world": world, "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default"),
               "passed": checks.passed, "failed": checks.failed, "failures": checks.failures[:20], "stats": stats}
    if rank == 0:
        print(json.dumps(summary), flush=True)
        print(f"{checks.passed} passed, {checks.failed} failed", flush=True)
        if args.out:
            pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
            name = "fresh_buffers_" + summary["allocator"].replace(":", "_").replace(",", "_") + f"_{world}.json"
            (pathlib.Path(args.out) / name).write_text(json.dumps(summary, indent=1))
    dist.destroy_process_group()
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
