"""reshard.torch.move_state_dict with block-scaled fp8 targets (block_scales=, scales=) on GPUs: weights moved from
training layouts (FSDP Shard(0), TP, Partial, FSDP2 + TP's _StridedShard) to serving layouts that hold whole blocks,
bf16 -> float8_e4m3fn / float8_e5m2 per 128 x 128 block (64 for small tensors); every code and every scale of every
target rank compared bit for bit with PyTorch's computation of the rule on the gathered tensor (docs/python.md); the
sender route (codes and scales cross) and the receiver route (Partial and replicated sources) both; into new DTensors,
into the receiver's own DTensors and local tensors (scales= too), where a repeat allocates nothing; under a memory
budget; bad requests raise one-line ValueErrors naming the tensor on every rank.

    torchrun --nproc-per-node N python/tests/gpu/check_block_scaled.py [--out DIR]     (N = 1, 2 or 4)

Exits 1 when any check fails (the failures are listed, and written to DIR/block_scaled.json).
"""

import argparse
import pathlib
import sys
import zlib

import torch
import torch.distributed as dist
from torch.distributed.tensor import Partial, Replicate, Shard

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_move_state_dict as base  # noqa: E402
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402

LARGEST = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
# name -> (global shape, block, target dtype); rows and columns split evenly in whole blocks over 1, 2 and 4 ranks.
WEIGHTS = {"wq": ((1024, 512), 128, torch.float8_e4m3fn), "w1": ((2048, 512), 128, torch.float8_e4m3fn),
           "w2": ((512, 2048), 128, torch.float8_e5m2), "small": ((256, 192), 64, torch.float8_e4m3fn),
           "edge": ((300, 512), 128, torch.float8_e4m3fn)}  # partial edge blocks: kept whole on every target rank


def pairs(world):
    if world >= 4:
        return [("train01_serve23", (2,), [0, 1], (2,), [2, 3]), ("2x2_to_2", (2, 2), [0, 1, 2, 3], (2,), [2, 3]),
                ("same_ranks_other_mesh", (2, 2), [0, 1, 2, 3], (4,), [0, 1, 2, 3])]
    if world == 2:
        return [("train0_serve1", (1,), [0], (1,), [1]), ("2_to_1", (2,), [0, 1], (1,), [1]),
                ("same_ranks_other_mesh", (2,), [0, 1], (1, 2), [0, 1])]
    return [("one_rank", (1,), [0], (1,), [0])]


def target_placements(name, ndim_mesh):
    if name == "edge":
        return [Replicate()] * ndim_mesh
    return [Replicate()] * (ndim_mesh - 1) + [Shard(1) if name in ("wq", "w1") else Shard(0)]


def source_placements(which, ndim_mesh):
    if which == "fsdp":
        return [Shard(0)] + [Replicate()] * (ndim_mesh - 1)
    if which == "partial":
        return [Partial()] + [Shard(0)] * (ndim_mesh - 1)
    if which == "replicated":
        return [Replicate()] * ndim_mesh
    return [base._StridedShard(0, split_factor=2), Shard(0)]


def reference(full, to, block):
    """The rule on the gathered tensor, as PyTorch computes it: (codes, scale_inv)."""
    x = full.float()
    m, n = x.shape
    gm, gn = -(-m // block), -(-n // block)
    padded = torch.zeros(gm * block, gn * block, device=x.device)
    padded[:m, :n] = x.abs()
    # Divided by a tensor: PyTorch divides a CUDA tensor by a Python number as a product with its rounded reciprocal,
    # which can differ from the rule's division in the last bit.
    s = padded.view(gm, block, gn, block).amax(dim=(1, 3)) / torch.tensor(LARGEST[to], device=x.device)
    s[s == 0] = 1
    full_s = s.repeat_interleave(block, 0)[:m].repeat_interleave(block, 1)[:, :n]
    return (x / full_s).to(to), s


def expected(full, mesh_shape, ranks, placements):
    return base.expected_local(full, mesh_shape, ranks, placements)


def check_out(checks, what, out, wants, tshape, tranks, tplacements):
    me = dist.get_rank()
    if me not in tranks:
        checks.ok(f"{what}: rank {me} outside the target gets {{}}", out == {})
        return
    good = set(out) == {k for name in wants for k in (name, name + "_scale_inv")}
    for name, (codes, scales) in wants.items():
        got, got_s = out.get(name), out.get(name + "_scale_inv")
        good = good and got is not None and got_s is not None
        good = good and tuple(got.placements) == tuple(tplacements[name]) == tuple(got_s.placements)
        place = tplacements[name]
        good = good and common.same_bits(got.to_local(), expected(codes, tshape, tranks, place).contiguous())
        good = good and common.same_bits(got_s.to_local(), expected(scales, tshape, tranks, place).contiguous())
        if not good:
            common.log("FAIL detail", what, name)
            break
    checks.ok(what, good)


def sync_case(checks, world, pair, meshes, which, seed):
    name, sshape, sranks, tshape, tranks = pair
    if which == "strided" and len(sshape) != 2:
        return
    smesh, tmesh = meshes
    me = dist.get_rank()
    sources, targets, tplacements, wants, blocks, dtypes = {}, {}, {}, {}, {}, {}
    for i, (key, (shape, block, to)) in enumerate(WEIGHTS.items()):
        if which == "partial":  # integers: exact sums in any order
            full = common.make_global(shape, torch.bfloat16, seed + i, common.exact_bound(world))
        else:
            full = common.random_like_global(shape, torch.float32, seed + i).to(torch.bfloat16)
            full *= 2.0 ** ((torch.arange(shape[0], device="cuda") // 96 % 7) - 3).to(torch.bfloat16)[:, None]
        sources[key] = base.source_dtensor(full, smesh, sshape, sranks, source_placements(which, len(sshape)),
                                           seed + i, common.exact_bound(world))
        tplacements[key] = target_placements(key, len(tshape))
        targets[key] = (tmesh, tplacements[key])
        wants[key] = reference(full, to, block)
        blocks[key], dtypes[key] = block, to
    what = f"{name} {which}"
    out = rt.move_state_dict(sources, targets, dtype=dtypes, block_scales=blocks)
    check_out(checks, what + " fresh", out, wants, tshape, tranks, tplacements)
    # Into the receiver's own DTensors (codes and scales, scales=), then into local tensors.
    if me in tranks:
        for v in out.values():
            v.to_local().zero_()
        into = {k: out[k] for k in WEIGHTS}
        into_scales = {k: out[k + "_scale_inv"] for k in WEIGHTS}
        plain = {k: torch.zeros_like(out[k].to_local()) for k in WEIGHTS}
        plain_scales = {k: torch.zeros_like(out[k + "_scale_inv"].to_local()) for k in WEIGHTS}
        back = rt.move_state_dict(sources, into, block_scales=blocks, scales=into_scales)
        checks.ok(what + " in place (the same DTensors)", all(back[k] is out[k] for k in out))
    else:
        into = {k: (tmesh, tplacements[k]) for k in WEIGHTS}
        into_scales = None
        plain = plain_scales = {k: None for k in WEIGHTS}
        back = rt.move_state_dict(sources, into, dtype=dtypes, block_scales=blocks)
        checks.ok(what + " in place (the same DTensors)", True)
    check_out(checks, what + " into DTensors", back, wants, tshape, tranks, tplacements)
    local_out = rt.move_state_dict(sources, {k: (tmesh, tplacements[k], plain[k]) for k in WEIGHTS}, dtype=dtypes,
                                   block_scales=blocks, scales=plain_scales if me in tranks else None)
    check_out(checks, what + " into local tensors", local_out, wants, tshape, tranks, tplacements)
    checks.ok(what + " local tensors written", me not in tranks or all(
        local_out[k].to_local().data_ptr() == plain[k].data_ptr() and
        local_out[k + "_scale_inv"].to_local().data_ptr() == plain_scales[k].data_ptr() for k in WEIGHTS))
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    if me in tranks:
        rt.move_state_dict(sources, into, block_scales=blocks, scales=into_scales)
    else:
        rt.move_state_dict(sources, into, dtype=dtypes, block_scales=blocks)
    torch.cuda.synchronize()
    checks.ok(what + " repeat allocates nothing", torch.cuda.memory_allocated() == before)
    seen = []
    # 4 MiB per rank: the largest tensor alone fits on 1, 2 and 4 ranks (w1 from rank 0 to rank 1, quantized by its
    # receiver: 2 MiB of bf16 workspace for its plan and the 2 MiB bf16 staging tensor the receiver quantizes), the
    # set of receiver-quantized tensors does not.
    budget_out = rt.move_state_dict(sources, targets, dtype=dtypes, block_scales=blocks, memory_budget="4MiB",
                                    progress=seen.append)
    check_out(checks, what + " 4MiB budget", budget_out, wants, tshape, tranks, tplacements)
    me_in = me in set(sranks) | set(tranks)
    checks.ok(what + " progress", not me_in or (seen and seen[-1].tensors_done == len(WEIGHTS)))


def bad_requests(checks, world):
    """Each bad request raises ValueError on every rank, naming the tensor."""
    ranks = list(range(world))
    mesh = base.mesh_of((world,), ranks)
    full = common.make_global((512, 512), torch.bfloat16, 1, 4)
    src = base.source_dtensor(full, mesh, (world,), ranks, [Shard(0)], 1, 4)
    e4m3 = torch.float8_e4m3fn

    def expect(what, needle, targets, **kw):
        try:
            rt.move_state_dict({"w": src}, targets, **kw)
            raised = ""
        except (ValueError, TypeError) as e:
            raised = str(e)
        good = needle in raised and "\n" not in raised
        if not good:
            print(f"rank {dist.get_rank()}: {what}: got {raised!r}", flush=True)
        checks.ok("bad request: " + what, good)

    expect("block scales of a bf16 target", "'w': block scales quantize into f8e4m3", {"w": (mesh, [Shard(0)])},
           block_scales={"w": 128})
    expect("a block of 0", "'w': the scale block is a whole number of elements from 1 to 4096, got 0",
           {"w": (mesh, [Shard(0)])}, dtype=e4m3, block_scales=0)
    if world > 1:
        expect("a target without whole blocks", "'w': the target does not hold whole 96x96 blocks",
               {"w": (mesh, [Shard(1)])}, dtype=e4m3, block_scales=96)
    expect("scales for a tensor not block-scaled", "'w': scales= gives a destination for its scales",
           {"w": (mesh, [Shard(0)])}, scales={"w": torch.zeros(2, 2, device="cuda")})
    expect("block_scales naming no source", "block_scales names 'v', which has no source", {"w": (mesh, [Shard(0)])},
           dtype=e4m3, block_scales={"v": 128})
    wrong = torch.zeros(3, 3, device="cuda") if dist.get_rank() == world - 1 else None
    expect("a scales destination of the wrong shape (one rank's)", "'w': rank", {"w": (mesh, [Shard(0)])}, dtype=e4m3,
           block_scales=128, scales={"w": wrong})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    a = parser.parse_args()
    _, world = common.setup()
    checks = base.Checks()
    for p in pairs(world):
        meshes = base.mesh_of(p[1], p[2]), base.mesh_of(p[3], p[4])
        for which in ("fsdp", "partial", "replicated", "strided"):
            sync_case(checks, world, p, meshes, which, zlib.crc32(f"{p[0]} {which}".encode()) % 1000)
    bad_requests(checks, world)
    checks.finish("block-scaled move_state_dict", a.out, "block_scaled.json")


if __name__ == "__main__":
    main()
