"""run_host and run_host_batch between two meshes of one world (dst_mesh, dst_ranks, world_size): disjoint,
overlapping and identical rank sets, permuted ranks, 1-D to 3-D meshes, uneven shapes, Partial sources of every
reduce op, _StridedShard (FSDP2 + TP) sources and targets, batches under one memory budget with a progress callback;
every element of every target rank checked against the global tensor (NumPy), ranks outside the target given None."""

import itertools
import zlib

import numpy as np
import pytest

import reshard
from host_reference import check_result, global_tensor, source_shards

KINDS = ["R", "S0", "S1", "P"]

# (name, source mesh, source ranks, target mesh, target ranks, world size)
PAIRS = [
    ("disjoint", [2], [0, 1], [2], [2, 3], 4),
    ("fewer", [2, 2], [0, 1, 2, 3], [2], [2, 3], 4),
    ("same_ranks_other_mesh", [2, 2], [0, 1, 2, 3], [4], [0, 1, 2, 3], 4),
    ("overlapping", [2], [0, 1], [3], [1, 2, 3], 4),
    ("permuted", [2, 2], [3, 1, 0, 2], [2, 2], [0, 2, 1, 3], 4),
    ("sub_world_grows", [2], [1, 3], [2, 2], [0, 1, 2, 3], 5),
]


def world_shards(src_mesh, src_ranks, world, src, g, rng):
    """Every world rank's source shard (None outside the source mesh). Ranks that differ only on Replicate mesh dims
    hold the same contribution (a Replicate dim holds equal data; a cross-mesh plan may read any replica), that of
    the rank at coordinate 0 on those dims."""
    by_position = source_shards(src_mesh, src, g, rng)
    shards = [None] * world
    for position, r in enumerate(src_ranks):
        coord = mesh_coord(position, src_mesh)
        replica0 = [0 if src[m] == "R" else c for m, c in enumerate(coord)]
        shards[r] = by_position[mesh_position(replica0, src_mesh)]
    return shards


def mesh_coord(position, mesh):
    coord = []
    for n in reversed(mesh):
        coord.append(position % n)
        position //= n
    return coord[::-1]


def mesh_position(coord, mesh):
    p = 0
    for c, n in zip(coord, mesh):
        p = p * n + c
    return p


def check_between(dst_mesh, dst_ranks, world, dst, g, outs):
    assert len(outs) == world
    for r in range(world):
        if r not in dst_ranks:
            assert outs[r] is None, f"rank {r} is outside the target mesh but got {outs[r]!r}"
    return check_result(dst_mesh, dst, g, [outs[r] for r in dst_ranks])


def layouts(mesh):
    return [list(c) for c in itertools.product(KINDS, repeat=len(mesh))]


def run_between(pair, src, dst, shape, dtype=np.float32, **kw):
    _, sm, sr, dm, dr, world = pair
    rng = np.random.default_rng(zlib.crc32(repr((pair, src, dst, shape)).encode()))
    g = global_tensor(shape, dtype, rng)
    shards = world_shards(sm, sr, world, src, g, rng)
    outs = reshard.run_host(sm, src, dst, shards, shape=shape, ranks=sr, dst_mesh=dm, dst_ranks=dr, world_size=world,
                            **kw)
    return check_between(dm, dr, world, dst, g, outs)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0])
@pytest.mark.parametrize("shape", [[3, 5], [1, 1], [4, 0]], ids=["uneven", "one", "empty"])
def test_every_pair_between_meshes(pair, shape):
    checked = 0
    for src, dst in itertools.product(layouts(pair[1]), layouts(pair[3])):
        checked += run_between(pair, src, dst, shape)
    assert checked > 0 or 0 in shape


@pytest.mark.parametrize("op", ["sum", "avg", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_partial_sources_reduce_across_meshes(op, dtype):
    pair = ("fewer", [2, 2], [0, 1, 2, 3], [2], [2, 3], 4)
    p = "P" if op == "sum" else f"P({op})"
    for src, dst in [([p, "S1"], ["S0"]), ([p, p], ["R"]), (["S0", p], ["S1"])]:
        if op == "avg" and np.dtype(dtype).kind == "i" and src.count(p) > 1:
            continue  # integer averages over several mesh dims truncate per dim (PyTorch's rule): not exact
        run_between(pair, src, dst, [7, 6], dtype)


def test_three_d_meshes_and_other_transports():
    pair = ("3d", [2, 1, 2], [4, 5, 6, 7], [2, 2], [0, 1, 2, 3], 8)
    cases = [(["S0", "R", "S1"], ["S1", "S0"]), (["P", "R", "S0"], ["R", "S1"]), (["R", "R", "R"], ["S0", "P"])]
    for src, dst in cases:
        for transport in ("nccl", "nvlink"):
            run_between(pair, src, dst, [9, 5], transport=transport)
    run_between(("3d_target", [4], [0, 1, 2, 3], [2, 2, 2], list(range(8)), 8), ["S1"], ["S0", "R", "S1"], [5, 9])


@pytest.mark.parametrize("strided,mesh,shape", [("SS0/2,S0", [2, 2], [8, 6]), ("SS0/2,S0", [2, 2], [7, 3]),
                                                ("SS1/2,S1", [3, 2], [4, 12])])
def test_strided_shard_between_meshes(strided, mesh, shape):
    """FSDP2 + TP's _StridedShard on the training mesh to plain layouts on serving ranks, and back."""
    n = int(np.prod(mesh))
    train = list(range(n))
    serve = list(range(n, n + 2))
    sp = strided.split(",")
    for plain in (["S0"], ["S1"], ["R"]):
        run_between(("to_serving", mesh, train, [2], serve, n + 2), sp, plain, shape)
        run_between(("from_serving", [2], serve, mesh, train, n + 2), plain, sp, shape)


def test_strided_placement_objects():
    class _StridedShard:  # PyTorch's class name and fields; _args spells it SS<dim>/<split factor>
        def __init__(self, dim, split_factor):
            self.dim, self.split_factor = dim, split_factor

    class Shard:
        def __init__(self, dim):
            self.dim = dim

    g = np.arange(48, dtype=np.float32).reshape(8, 6)
    rng = np.random.default_rng(1)
    shards = world_shards([2, 2], [0, 1, 2, 3], 6, ["SS0/2", "S0"], g, rng)
    outs = reshard.run_host([2, 2], [_StridedShard(0, split_factor=2), Shard(0)], "S0", shards, dst_mesh=[2],
                            dst_ranks=[4, 5])
    assert check_between([2], [4, 5], 6, ["S0"], g, outs) == 48


def test_complex_and_bf16_between_meshes():
    run_between(PAIRS[0], ["S0"], ["S1"], [4, 6], np.complex64)
    rng = np.random.default_rng(3)
    g = rng.integers(0, 1 << 16, size=(5, 4)).astype(np.uint16)
    shards = world_shards([2], [0, 1], 4, ["S0"], g, rng)
    outs = reshard.run_host([2], "S0", "R", shards, dtype="bf16", dst_mesh=[2], dst_ranks=[2, 3])
    assert check_between([2], [2, 3], 4, ["R"], g, outs) == 40


def batch_between(pair, n, seed, **kw):
    _, sm, sr, dm, dr, world = pair
    rng = np.random.default_rng(seed)
    src_lays, dst_lays = layouts(sm), layouts(dm)
    shapes = [[3, 5], [8, 6], [1, 1], [4, 0], [16, 9]]
    dtypes = [np.float32, np.int64, np.uint8, np.float64]
    tensors, expected = [], []
    for i in range(n):
        src, dst, shape = src_lays[(i * 7) % len(src_lays)], dst_lays[(i * 5 + 3) % len(dst_lays)], shapes[i % 5]
        g = global_tensor(shape, dtypes[i % 4], rng)
        tensors.append({"src": src, "dst": dst, "shape": shape, "shards": world_shards(sm, sr, world, src, g, rng)})
        expected.append((dst, g))
    outs = reshard.run_host_batch(sm, tensors, ranks=sr, dst_mesh=dm, dst_ranks=dr, world_size=world, **kw)
    assert len(outs) == n
    return sum(check_between(dm, dr, world, dst, g, o) for (dst, g), o in zip(expected, outs))


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0])
def test_batch_between_meshes(pair):
    assert batch_between(pair, 20, zlib.crc32(pair[0].encode())) > 0


def test_batch_memory_budget_groups_and_progress():
    """Partial(sum) sources on NCCL: each receiver stages the contributions (8 KiB per tensor, planned alone); a 20 KiB
    budget for the whole set runs 7 of them in groups of at most 2."""
    rng = np.random.default_rng(5)
    assert reshard.plan([2, 2], "P,S1", "S1", [64, 64], "f32", dst_mesh=[2], dst_ranks=[2, 3],
                        transport="nccl").peak_workspace_bytes == 8192
    tensors, fulls = [], []
    for _ in range(7):
        g = global_tensor([64, 64], np.float32, rng)
        shards = world_shards([2, 2], [0, 1, 2, 3], 4, ["P", "S1"], g, rng)
        tensors.append({"src": "P,S1", "dst": "S1", "shards": shards})
        fulls.append(g)
    seen = []
    outs = reshard.run_host_batch([2, 2], tensors, dst_mesh=[2], dst_ranks=[2, 3], transport="nccl",
                                  memory_budget="20KiB", progress=seen.append)
    for g, o in zip(fulls, outs):
        assert check_between([2], [2, 3], 4, ["S1"], g, o) == 64 * 64
    assert len(seen) >= 4, "groups of at most 2 tensors"
    assert [p.group for p in seen] == list(range(1, len(seen) + 1))
    assert all(p.groups == len(seen) and p.tensors_total == 7 for p in seen)
    assert seen[-1].tensors_done == 7 and seen[-1].bytes_done == seen[-1].bytes_total == 7 * 64 * 64 * 4
    assert all(a.tensors_done < b.tensors_done for a, b in zip(seen, seen[1:]))
    # Without a budget: one group, one call.
    seen.clear()
    batch_between(PAIRS[1], 12, 7, progress=seen.append)
    assert [(p.group, p.groups, p.tensors_done) for p in seen] == [(1, 1, 12)]


def test_groups_fit_the_budget():
    """Plans that need no workspace alone still stage their small messages when batched (coalescing): the budget
    counts the merged program, so 10 such tensors of 16 KiB do not fit 40 KiB in one group."""
    args = []
    for i in range(10):
        a = reshard._plan_args([2, 2], "S0,S1", "S1,S0", [64, 64], "f32", "auto", None, "nccl", 8, None, None)
        args.append(a)
    groups = reshard._core.budget_groups(args, 40 * 1024)
    assert len(groups) > 1
    assert sorted(t for g in groups for t in g) == list(range(10))
    assert all(g == list(range(g[0], g[0] + len(g))) for g in groups)
    assert reshard._core.budget_groups(args, None) == [list(range(10))]


def test_errors_between_meshes():
    g = np.arange(12, dtype=np.float32).reshape(4, 3)
    halves = [g[:2], g[2:], None, None]
    with pytest.raises(ValueError, match="world of 4 ranks but 3 shards"):
        reshard.run_host([2], "S0", "R", halves[:3], dst_mesh=[2], dst_ranks=[2, 3])
    with pytest.raises(ValueError, match="rank 2 is not in the source mesh but its shard has 6 elements"):
        reshard.run_host([2], "S0", "R", [g[:2], g[2:], g[:2], None], dst_mesh=[2], dst_ranks=[2, 3])
    with pytest.raises(ValueError, match="rank list entry 4"):
        reshard.run_host([2], "S0", "R", halves, dst_mesh=[2], dst_ranks=[2, 4], world_size=4)
    with pytest.raises(ValueError, match="tensor 1: "):
        reshard.run_host_batch([2], [{"src": "S0", "dst": "R", "shards": halves},
                                     {"src": "S0", "dst": "R", "shards": halves[:3]}], dst_mesh=[2], dst_ranks=[2, 3])
    with pytest.raises(ValueError, match="tensor 0: no plan fits the memory budget of 0 bytes"):
        reshard.run_host_batch([2], [{"src": "S0", "dst": "S1,R", "shards": halves, "shape": [4, 3]}] * 2,
                               dst_mesh=[2, 1], dst_ranks=[2, 3], memory_budget=0, transport="nccl")
