"""reshard.torch.move_state_dict on GPUs: sets of DTensors moved between meshes of one world (disjoint, overlapping and
identical rank sets, permuted ranks, 1-D to 3-D meshes), uneven shapes, Partial sources, FSDP2 + TP's _StridedShard,
into new DTensors and into destinations the receiver owns (DTensors and plain local tensors, dense and strided), under
a memory budget with a progress callback; dtype conversion in the move (bf16 sources to fp8 e4m3/e5m2, f16, f32 and
kept, in one call: one batch per pair), compared bit for bit with PyTorch's .to(dtype) of the global tensor; every
element of every target rank compared with the global tensor; bad requests raise one-line ValueErrors naming the
tensor on every rank; ranks in neither mesh return at once; a repeated sync into existing destinations allocates
nothing.

    torchrun --nproc-per-node 2 python/tests/gpu/check_move_state_dict.py [--out DIR]
    torchrun --nproc-per-node 4 python/tests/gpu/check_move_state_dict.py [--out DIR]

Exits 1 when any check fails (the failures are listed, and written to DIR/move_state_dict.json).
"""

import argparse
import pathlib
import sys
import zlib

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402
import reshard  # noqa: E402
import reshard.torch as rt  # noqa: E402

try:
    from torch.distributed.tensor.placement_types import _StridedShard
except ImportError:  # older PyTorch
    _StridedShard = None

# A few parameters of a transformer layer (uneven dims included), small enough to check element by element.
SHAPES = {"embed": (1000, 64), "wq": (256, 256), "w1": (344, 256), "w2": (256, 344), "norm": (256,), "odd": (37, 5)}


def mesh_of(shape, ranks):
    return DeviceMesh("cuda", torch.tensor(ranks, dtype=torch.int64).reshape(shape))


def pairs(world):
    """(name, source mesh shape, source ranks, target mesh shape, target ranks) for this world size."""
    if world >= 4:
        return [("train01_serve23", (2,), [0, 1], (2,), [2, 3]),
                ("2x2_to_2", (2, 2), [0, 1, 2, 3], (2,), [2, 3]),
                ("same_ranks_other_mesh", (2, 2), [0, 1, 2, 3], (4,), [0, 1, 2, 3]),
                ("overlapping", (2,), [0, 1], (3,), [1, 2, 3]),
                ("3d_to_2d", (2, 1, 2), [0, 1, 2, 3], (2, 2), [3, 2, 1, 0]),
                ("neither", (1,), [0], (1,), [1])]  # ranks 2, 3 in neither mesh
    return [("train0_serve1", (1,), [0], (1,), [1]),
            ("2_to_1", (2,), [0, 1], (1,), [1]),
            ("same_ranks_other_mesh", (2,), [0, 1], (1, 2), [0, 1]),
            ("permuted", (2,), [0, 1], (2,), [1, 0])]


def source_placements(ndim_mesh, tensor_ndim, which):
    """Training layouts: FSDP-style Shard(0), TP Shard(1)/Shard(0), a Partial(sum) dim, and _StridedShard."""
    if which == "fsdp":
        return [Shard(0)] + [Replicate()] * (ndim_mesh - 1)
    if which == "tp":
        return [Replicate()] * (ndim_mesh - 1) + [Shard(tensor_ndim - 1)]
    if which == "partial":
        return [Partial()] + [Shard(0)] * (ndim_mesh - 1)
    return [_StridedShard(0, split_factor=2), Shard(0)]  # FSDP2 + TP on a 2-D mesh


def target_placements(ndim_mesh, tensor_ndim, i):
    kinds = [Shard(0), Shard(tensor_ndim - 1), Replicate()]
    return [kinds[(i + m) % 3] for m in range(ndim_mesh)]


def layout_box(mesh_shape, ranks, placements, shape):
    """(local shape, global offset) of this rank in a layout, or None outside the mesh (reshard.layout: PyTorch's
    rule, _StridedShard included where each part is one box)."""
    me = dist.get_rank()
    if me not in ranks:
        return None
    text = [reshard._args.placement_text(p) for p in placements]
    entry = reshard.layout(list(mesh_shape), text, list(shape))["ranks"][ranks.index(me)]  # by mesh position
    return entry["local_shape"], entry["global_offset"]


def source_dtensor(full, mesh, mesh_shape, ranks, placements, seed, bound):
    """The source DTensor on every rank (an empty local tensor outside the mesh). Partial(sum) contributions: the
    first along the Partial mesh dim holds full - (k-1) * noise, the others noise (exact in bf16)."""
    box = layout_box(mesh_shape, ranks, placements, full.shape)
    if box is None:
        local = full.new_empty(0)
    else:
        shape, offset = box
        local = full[tuple(slice(o, o + s) for o, s in zip(offset, shape))].clone()
        for m, p in enumerate(placements):
            if p.is_partial():
                k = mesh_shape[m]
                coord = common_coord(ranks.index(dist.get_rank()), mesh_shape)[m]
                noise = common.make_global(tuple(shape), full.dtype, seed + 7, bound)
                local = local - noise * (k - 1) if coord == 0 else noise
    return DTensor.from_local(local.contiguous(), mesh, placements, run_check=False, shape=full.shape,
                              stride=full.stride())


def common_coord(position, mesh_shape):
    return reshard._shapes.mesh_coord(position, list(mesh_shape))


class Checks:
    def __init__(self):
        self.passed = self.failed = 0
        self.failures = []

    def ok(self, what, flag):
        if common.all_ranks_true(flag):
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(what)
            common.log("FAIL", what)

    def finish(self, label, out_dir, file_name):
        """Logs the counts, writes them to out_dir/file_name (when given), ends the process group and exits 1 on a
        failure."""
        common.log(f"{label}: {self.passed} checks passed, {self.failed} failed")
        if out_dir:
            common.write_json(out_dir, file_name, {"passed": self.passed, "failed": self.failed,
                                                   "failures": self.failures, "versions": common.versions()})
        dist.barrier()
        dist.destroy_process_group()
        sys.exit(1 if self.failed else 0)


def expected_local(full, mesh_shape, ranks, placements):
    box = layout_box(mesh_shape, ranks, placements, full.shape)
    if box is None:
        return None
    shape, offset = box
    return full[tuple(slice(o, o + s) for o, s in zip(offset, shape))]


def check_targets(checks, what, out, fulls, tshape, tranks, tplacements):
    me = dist.get_rank()
    if me not in tranks:
        checks.ok(f"{what}: rank {me} outside the target gets {{}}", out == {})
        return
    good = set(out) == set(fulls)
    for name, full in fulls.items():
        want = expected_local(full, tshape, tranks, tplacements[name])
        got = out.get(name)
        good = good and got is not None and tuple(got.placements) == tuple(tplacements[name])
        good = good and common.same_bits(got.to_local(), want.contiguous())
    checks.ok(what, good)


def state_dict(world, pair, meshes, which, seed, make_full, wanted=lambda key, full: full):
    """One sync's tensors, tensor i of SHAPES made by make_full(i, shape, bound): (expected gathered targets, source
    DTensors, (mesh, placements) targets, target placements), by name; None where `which` does not apply to the pair."""
    name, sshape, sranks, tshape, tranks = pair
    if which == "strided" and (len(sshape) != 2 or _StridedShard is None):
        return None
    smesh, tmesh = meshes
    bound = common.exact_bound(world)
    fulls, sources, targets, tplacements = {}, {}, {}, {}
    for i, (key, shape) in enumerate(SHAPES.items()):
        full = make_full(i, shape, bound)
        fulls[key] = wanted(key, full)
        sources[key] = source_dtensor(full, smesh, sshape, sranks, source_placements(len(sshape), len(shape), which),
                                      seed + i, bound)
        tplacements[key] = target_placements(len(tshape), len(shape), i)
        targets[key] = (tmesh, tplacements[key])
    return fulls, sources, targets, tplacements


def sync_case(checks, world, pair, meshes, which, dtype, seed):
    name, sshape, sranks, tshape, tranks = pair
    tmesh = meshes[1]
    made = state_dict(world, pair, meshes, which, seed,
                      lambda i, shape, bound: common.make_global(shape, dtype, seed + i, bound))
    if made is None:
        return
    fulls, sources, targets, tplacements = made
    what = f"{name} {which} {dtype}"
    out = rt.move_state_dict(sources, targets)
    check_targets(checks, what + " fresh", out, fulls, tshape, tranks, tplacements)
    # Into the receiver's own tensors: the DTensors just made (in place), plain local tensors, strided ones.
    if dist.get_rank() in tranks:
        for v in out.values():
            v.to_local().zero_()
        into = dict(out)
        plain = {k: torch.zeros_like(v.to_local()) for k, v in out.items()}
        strided = {k: torch.zeros(tuple(reversed(v.to_local().shape)), dtype=dtype, device="cuda").t()
                   for k, v in out.items() if v.to_local().ndim == 2}
    else:
        into = {k: (tmesh, tplacements[k]) for k in fulls}
        plain, strided = {k: None for k in fulls}, {}
    back = rt.move_state_dict(sources, into)
    check_targets(checks, what + " into DTensors", back, fulls, tshape, tranks, tplacements)
    if dist.get_rank() in tranks:
        checks.ok(what + " in place (the same DTensors)", all(back[k] is out[k] for k in out))
    else:
        checks.ok(what + " in place (the same DTensors)", True)
    plain_out = rt.move_state_dict(sources, {k: (tmesh, tplacements[k], plain[k]) for k in fulls})
    check_targets(checks, what + " into local tensors", plain_out, fulls, tshape, tranks, tplacements)
    if dist.get_rank() in tranks:
        checks.ok(what + " local tensors written", all(plain_out[k].to_local().data_ptr() == plain[k].data_ptr()
                                                        for k in fulls))
    else:
        checks.ok(what + " local tensors written", True)
    if dist.get_rank() in tranks:
        strided_targets = {k: (tmesh, tplacements[k], strided.get(k, plain[k])) for k in fulls}
    else:
        strided_targets = {k: (tmesh, tplacements[k]) for k in fulls}
    s_out = rt.move_state_dict(sources, strided_targets)
    check_targets(checks, what + " into strided tensors", s_out, fulls, tshape, tranks, tplacements)
    # A repeat into the same destinations allocates nothing.
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    rt.move_state_dict(sources, into)
    torch.cuda.synchronize()
    checks.ok(what + " repeat allocates nothing", torch.cuda.memory_allocated() == before)
    # The whole set under a memory budget (groups run one after another), with progress.
    seen = []
    budget_out = rt.move_state_dict(sources, targets, memory_budget="1MiB", progress=seen.append)
    check_targets(checks, what + " 1MiB budget", budget_out, fulls, tshape, tranks, tplacements)
    me_in = dist.get_rank() in set(sranks) | set(tranks)
    checks.ok(what + " progress", not me_in or (seen and seen[-1].tensors_done == len(fulls)
                                                 and seen[-1].group == seen[-1].groups))


# Target dtypes of a converting sync, by tensor (bf16 sources): cast to fp8, widened, kept.
TARGET_DTYPES = dict(zip(SHAPES, [torch.float8_e4m3fn, torch.float16, torch.float32, torch.bfloat16,
                                  torch.float8_e5m2, torch.float8_e4m3fn]))


def conversion_case(checks, world, pair, meshes, which, seed):
    """bf16 sources converted on the way (dtype= for new targets and local tensors; the DTensor's own dtype in place):
    random normal values (rounding exercised), integers for Partial sources (exact sums, then one rounding)."""
    name, sshape, sranks, tshape, tranks = pair
    tmesh = meshes[1]

    def make_full(i, shape, bound):
        if which == "partial":
            return common.make_global(shape, torch.bfloat16, seed + i, bound)
        return common.random_like_global(shape, torch.float32, seed + i).to(torch.bfloat16)

    made = state_dict(world, pair, meshes, which, seed, make_full, lambda key, full: full.to(TARGET_DTYPES[key]))
    if made is None:
        return
    fulls, sources, targets, tplacements = made
    what = f"{name} {which} bf16 -> fp8/f16/f32/bf16"
    out = rt.move_state_dict(sources, targets, dtype=TARGET_DTYPES)
    check_targets(checks, what + " fresh", out, fulls, tshape, tranks, tplacements)
    me = dist.get_rank()
    if me in tranks:
        for v in out.values():
            v.to_local().zero_()
        into = dict(out)
        plain = {k: torch.zeros_like(v.to_local()) for k, v in out.items()}
    else:
        into = {k: (tmesh, tplacements[k]) for k in fulls}
        plain = {k: None for k in fulls}
    back = rt.move_state_dict(sources, into, dtype=None if me in tranks else TARGET_DTYPES)
    check_targets(checks, what + " into DTensors", back, fulls, tshape, tranks, tplacements)
    local_out = rt.move_state_dict(sources, {k: (tmesh, tplacements[k], plain[k]) for k in fulls},
                                   dtype=TARGET_DTYPES)
    check_targets(checks, what + " into local tensors", local_out, fulls, tshape, tranks, tplacements)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    rt.move_state_dict(sources, into, dtype=None if me in tranks else TARGET_DTYPES)
    torch.cuda.synchronize()
    checks.ok(what + " repeat allocates nothing", torch.cuda.memory_allocated() == before)
    seen = []
    budget_out = rt.move_state_dict(sources, targets, dtype=TARGET_DTYPES, memory_budget="1MiB",
                                    progress=seen.append)
    check_targets(checks, what + " 1MiB budget", budget_out, fulls, tshape, tranks, tplacements)


def bad_requests(checks, world):
    """Each bad request raises ValueError on every rank, naming the tensor."""
    smesh = mesh_of((world // 2,), list(range(world // 2)))
    tranks = list(range(world // 2, world))
    tmesh = mesh_of((len(tranks),), tranks)
    full = common.make_global((16, 8), torch.bfloat16, 1, 4)
    src = source_dtensor(full, smesh, (world // 2,), list(range(world // 2)), [Shard(0)], 1, 4)
    me = dist.get_rank()

    def expect(what, targets, needle, sources=None):
        try:
            rt.move_state_dict(sources or {"w": src}, targets)
            raised = ""
        except ValueError as e:
            raised = str(e)
        good = "'w'" in raised and needle in raised and "\n" not in raised
        if not good:
            print(f"rank {me}: {what}: got {raised!r}", flush=True)
        checks.ok("bad request: " + what, good)

    other = DTensor.from_local(torch.zeros(1, 8, dtype=torch.bfloat16, device="cuda"), tmesh, [Replicate()],
                               run_check=False, shape=(17, 8), stride=(8, 1))
    expect("mismatched global shapes", {"w": other}, "global shape")
    i32 = DTensor.from_local(torch.zeros(16, 8, dtype=torch.int32, device="cuda"), tmesh, [Replicate()],
                             run_check=False, shape=(16, 8), stride=(8, 1))
    expect("unsupported dtype pair", {"w": i32}, "is not a conversion the move makes")
    f16 = torch.zeros(16 // len(tranks), 8, dtype=torch.float16, device="cuda") if me in tranks else None
    try:
        rt.move_state_dict({"w": src}, {"w": (tmesh, [Shard(0)], f16) if me in tranks else (tmesh, [Shard(0)])},
                           dtype=torch.float8_e4m3fn)
        raised = ""
    except ValueError as e:
        raised = str(e)
    checks.ok("bad request: destination of another dtype than dtype=",
              "'w'" in raised and "the target's dtype is torch.float8_e4m3fn" in raised)
    wrong = torch.zeros(3, 3, dtype=torch.bfloat16, device="cuda") if me == tranks[-1] else None
    expect("destination of the wrong shape (one rank's)", {"w": (tmesh, [Shard(0)], wrong) if me in tranks else
                                                           (tmesh, [Shard(0)])}, "destination has shape")
    try:
        outside = DeviceMesh("cuda", torch.tensor([0, world]), _init_backend=False)
    except Exception as e:  # noqa: BLE001 - this PyTorch cannot describe such a mesh: nothing to check
        common.log("skipped: a mesh with a rank outside the world:", type(e).__name__)
        return
    expect("target rank outside the world", {"w": (outside, [Shard(0)])}, "outside the world")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    a = parser.parse_args()
    _, world = common.setup()
    checks = Checks()
    for p in pairs(world):
        meshes = mesh_of(p[1], p[2]), mesh_of(p[3], p[4])  # made on every rank, in the same order
        for which in ("fsdp", "tp", "partial", "strided"):
            for dtype in (torch.bfloat16, torch.float32):
                seed = zlib.crc32(f"{p[0]} {which}".encode()) % 1000
                sync_case(checks, world, p, meshes, which, dtype, seed)
            conversion_case(checks, world, p, meshes, which, zlib.crc32(f"{p[0]} {which} convert".encode()) % 1000)
    bad_requests(checks, world)
    checks.finish("move_state_dict", a.out, "move_state_dict.json")


if __name__ == "__main__":
    main()
