"""run_host: NumPy shards through the executor on the host backend, every element of every rank checked.

Every pair of R/S0/S1/P(sum) on meshes (1), (2), (3), (1,2), (2,1) and (2,2), sizes 0 (4x0), 1 (1x1) and uneven
(3x5), is run. On the 3-D meshes (2,1,2) and (2,2,2) (64 layouts, 4096 pairs per size) the default run takes, for the
uneven size, every source with 16 destinations spread over all 64 (1024 pairs, every layout as source and as target)
and, for sizes 0 and 1, every source with one destination (64 pairs, every layout as source and as target), to keep
the suite fast; RESHARD_PY_EXHAUSTIVE=1 runs all 4096 pairs at all three sizes.
"""

import itertools
import json
import os
import zlib

import numpy as np
import pytest

import reshard
from host_reference import check_result, global_tensor, source_shards

KINDS = ["R", "S0", "S1", "P"]
SIZES = {"empty": [4, 0], "one": [1, 1], "uneven": [3, 5]}
FULL_MESHES = [[1], [2], [3], [1, 2], [2, 1], [2, 2]]


def layouts(mesh):
    return [list(c) for c in itertools.product(KINDS, repeat=len(mesh))]


def run_pair(mesh, src, dst, shape, dtype=np.float32, rng=None, **kw):
    rng = rng or np.random.default_rng(zlib.crc32(repr((mesh, src, dst, shape)).encode()))
    g = global_tensor(shape, dtype, rng)
    shards = source_shards(mesh, src, g, rng)
    outs = reshard.run_host(mesh, src, dst, shards, shape=shape, **kw)
    return check_result(mesh, dst, g, outs)


@pytest.mark.parametrize("mesh", FULL_MESHES, ids=lambda m: "x".join(map(str, m)))
@pytest.mark.parametrize("size", list(SIZES))
def test_every_pair(mesh, size):
    shape = SIZES[size]
    checked = 0
    for src, dst in itertools.product(layouts(mesh), repeat=2):
        checked += run_pair(mesh, src, dst, shape)
    assert checked > 0 or size == "empty"


def pairs_3d(mesh, size):
    lays = layouts(mesh)
    if os.environ.get("RESHARD_PY_EXHAUSTIVE") == "1":
        return list(itertools.product(lays, repeat=2))
    per_src = 16 if size == "uneven" else 1
    n = len(lays)
    return [(lays[i], lays[(i * 5 + 3 + j * (n // per_src)) % n]) for i in range(n) for j in range(per_src)]


@pytest.mark.parametrize("mesh", [[2, 1, 2], [2, 2, 2]], ids=lambda m: "x".join(map(str, m)))
@pytest.mark.parametrize("size", list(SIZES))
def test_pairs_on_3d_meshes(mesh, size):
    pairs = pairs_3d(mesh, size)
    for src, dst in pairs:
        run_pair(mesh, src, dst, SIZES[size])
    assert {tuple(s) for s, _ in pairs} == {tuple(d) for _, d in pairs} == {tuple(x) for x in layouts(mesh)}


DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes(dtype):
    for src, dst in [(["S0", "S1"], ["S1", "S0"]), (["P", "R"], ["S1", "P"]), (["R", "S0"], ["P", "S1"]),
                     (["P", "P"], ["R", "S0"]), (["S1", "P"], ["P", "R"])]:
        run_pair([2, 2], src, dst, [5, 3], dtype=dtype)


def test_bf16_as_uint16_bits():
    rng = np.random.default_rng(7)
    g32 = rng.integers(-20, 20, size=(6, 5)).astype(np.float32)
    as_bf16 = lambda a: (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    from_bf16 = lambda a: (a.astype(np.uint32) << 16).view(np.float32)
    src_shards = source_shards([2], ["P"], g32, rng)
    outs = reshard.run_host([2], "P", "S1", [as_bf16(s) for s in src_shards], dtype="bf16")
    check_result([2], ["S1"], g32, [from_bf16(o) for o in outs])


@pytest.mark.parametrize("op", ["avg", "max", "min"])
def test_partial_ops(op):
    for src, dst in [([f"P({op})"], ["R"]), ([f"P({op})"], ["S1"]), (["R"], [f"P({op})"]), (["S0"], [f"P({op})"])]:
        run_pair([2], src, dst, [3, 5])
        run_pair([2], src, dst, [3, 5], dtype=np.int32)
    run_pair([2, 2], [f"P({op})", "S0"], ["S1", f"P({op})"], [4, 6])


def test_strategies_and_placement_forms():
    for strategy in ["collective", "p2p", "hybrid", "auto"]:
        run_pair([2, 2], ["S0", "S1"], ["S1", "S0"], [6, 7], strategy=strategy)
    rng = np.random.default_rng(1)
    g = global_tensor([6, 7], np.float32, rng)
    shards = source_shards([2, 2], ["S0", "S1"], g, rng)
    check_result([2, 2], ["R", "S0"], g, reshard.run_host("2x2", "Shard(0),S(1)", ["R", "S-2"], shards))
    check_result([2, 2], ["R", "S0"], g, reshard.run_host([2, 2], "S0,S1", "R,S0", shards, memory_budget="1MiB"))


def test_scalar():
    g = np.array(3.5, dtype=np.float32)
    outs = reshard.run_host([2], "R", "P", [g.copy(), g.copy()], shape=[])
    assert [o.shape for o in outs] == [(), ()] and float(outs[0] + outs[1]) == 3.5
    outs = reshard.run_host([2], "P", "R", [np.float32(1.25), np.float32(2.0)])
    assert [float(o) for o in outs] == [3.25, 3.25]


def test_explicit_ranks():
    rng = np.random.default_rng(3)
    g = global_tensor([5, 4], np.int64, rng)
    ranks = [3, 1, 0, 2]
    lay = reshard.layout([2, 2], "S0,S1", [5, 4], ranks=ranks)["ranks"]
    shards = [g[o[0]:o[0] + s[0], o[1]:o[1] + s[1]].copy() for o, s in
              ((r["global_offset"], r["local_shape"]) for r in lay)]
    outs = reshard.run_host([2, 2], "S0,S1", "S1,R", shards, ranks=ranks)
    for r, entry in enumerate(reshard.layout([2, 2], "S1,R", [5, 4], ranks=ranks)["ranks"]):
        o, s = entry["global_offset"], entry["local_shape"]
        assert np.array_equal(outs[r], g[o[0]:o[0] + s[0], o[1]:o[1] + s[1]])


def test_bad_input():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match="2 ranks but 1 shards"):
        reshard.run_host([2], "S0", "S1", [x], shape=[4, 4])
    with pytest.raises(ValueError, match="shape"):
        reshard.run_host([2], "S0", "S1", [x, np.zeros((3, 4), np.float32)], shape=[4, 4])
    with pytest.raises(ValueError, match="dtype"):
        reshard.run_host([2], "S0", "S1", [x, x.astype(np.float64)])
    with pytest.raises(ValueError, match=r"^shard of rank 1 has 1 dims \(shape \[8\]\); rank 0's has 2$"):
        reshard.run_host([2], "S0", "S1", [x, np.zeros(8, np.float32)])  # rank 1 is the odd one
    with pytest.raises(ValueError, match="unknown placement"):
        reshard.run_host([2], "S0", "X1", [x, x])
    with pytest.raises(ValueError, match="unknown dtype"):
        reshard.run_host([2], "S0", "S1", [x.astype(np.uint32), x.astype(np.uint32)])
    with pytest.raises(ValueError, match="-byte elements"):
        reshard.run_host([2], "S0", "S1", [x, x], dtype="bf16")
    with pytest.raises(ValueError, match="needs one shard per rank"):
        reshard.run_host([2], "S0", "S1", [])
    with pytest.raises(ValueError):
        reshard.run_host([2], "S0", "S1", [x, x], shape=[4, 4], strategy="nope")


def test_arrays_whose_elements_are_not_the_dtype_are_refused():
    # Object arrays hold pointers and float32 arrays float bits: summed as integers they were garbage or a crash.
    objects = np.array([1, 2], dtype=object)
    with pytest.raises(ValueError, match="does not hold i64"):
        reshard.run_host([2], "P", "R", [objects, objects], dtype="i64")
    floats = np.array([1.5, 2.5], dtype=np.float32)
    with pytest.raises(ValueError, match="does not hold i32"):
        reshard.run_host([2], "P", "R", [floats, floats], dtype="i32")


def test_max_and_min_of_complex_partials_are_refused():
    z = np.array([1 + 5j, 3 + 2j], dtype=np.complex64)
    for op in ("max", "min"):
        with pytest.raises(ValueError, match=f"Partial\\({op}\\) is not supported on complex64"):
            reshard.run_host([2], f"P({op})", "R", [z, z])
    summed = reshard.run_host([2], "P", "R", [z, z])
    assert all(np.array_equal(s, 2 * z) for s in summed)


# dtype conversion in the move (to_dtype): every element of every rank's target equals the global tensor converted
# (values exact in every target type here: halves in [-8, 8], so conversion is exact and the check is bit for bit;
# rounding is tests/executor/dtype_convert_test.cpp's).
def e4m3_codes(values):
    """The float8_e4m3fn bits of exactly representable values."""
    codes = np.arange(256, dtype=np.uint8)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = (codes & 0x7).astype(np.float64)
    table = sign * np.where(exp == 0, man / 8 * 2.0**-6, (1 + man / 8) * 2.0 ** (exp.astype(np.float64) - 7))
    table[(exp == 15) & (codes & 0x7 == 7)] = np.nan
    table[0x80] = np.nan  # -0: values equal to 0 take +0's code
    lookup = {float(v): np.uint8(c) for c, v in enumerate(table) if not np.isnan(v)}
    return np.vectorize(lambda v: lookup[float(v)], otypes=[np.uint8])(values)


def converted(g, to):
    """The global tensor g (float64 values) in the target type as run_host returns it (bf16 and fp8 as bits)."""
    if to == "bf16":
        return (g.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if to == "f8e4m3":
        return e4m3_codes(g)
    return g.astype({"f64": np.float64, "f32": np.float32, "f16": np.float16}[to])


CONVERSIONS = [("f32", "f16"), ("f64", "f32"), ("f32", "bf16"), ("bf16", "f32"), ("f32", "f8e4m3"), ("f16", "f64")]


@pytest.mark.parametrize("pair", CONVERSIONS, ids=lambda p: f"{p[0]}_to_{p[1]}")
@pytest.mark.parametrize("mesh", [[2], [2, 2], [3]], ids=lambda m: "x".join(map(str, m)))
def test_conversion_in_the_move(pair, mesh):
    src_type, to = pair
    checked = 0
    for src, dst in itertools.product(layouts(mesh), repeat=2):
        if "P" in dst:
            continue  # a Partial target is refused (test_conversion_refusals)
        shape = [3, 5]
        rng = np.random.default_rng(zlib.crc32(repr((mesh, src, dst, pair)).encode()))
        g = global_tensor(shape, np.float64, rng) / 2.5  # integers in [-20, 20) -> multiples of 0.4...
        g = np.round(g * 2) / 2  # ... made halves in [-8, 8]
        if src_type == "bf16":
            shards = [s.astype(np.float32).view(np.uint32) >> 16 for s in source_shards(mesh, src, g, rng)]
            shards = [s.astype(np.uint16) for s in shards]
        else:
            shards = source_shards(mesh, src, g.astype({"f64": np.float64, "f32": np.float32,
                                                          "f16": np.float16}[src_type]), rng)
        outs = reshard.run_host(mesh, src, dst, shards, shape=shape, dtype=src_type, to_dtype=to)
        checked += check_result(mesh, dst, converted(g, to), outs)
    assert checked > 0


def test_conversion_plan_and_refusals():
    p = reshard.plan([2], "S0", "S1", [8, 8], "bf16", to_dtype="f8e4m3")
    assert (p.dtype, p.to_dtype) == ("bf16", "f8e4m3")
    assert '"to_dtype": "f8e4m3"' in p.json()
    assert reshard.plan([2], "S0", "S1", [8, 8], "f32").to_dtype == "f32"
    with pytest.raises(ValueError, match="i32"):
        reshard.plan([2], "S0", "S1", [8, 8], "f32", to_dtype="i32")
    with pytest.raises(ValueError, match="Partial"):
        reshard.plan([2], "S0", "P", [8, 8], "f32", to_dtype="f16")
    shards = [np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32)]
    with pytest.raises(ValueError, match="dtype"):
        reshard.run_host([2], "S0", "S1", shards, to_dtype="not-a-dtype")


def source_of(g, src_type, mesh, src, rng):
    """The source shards of g (halves) in src_type, bf16 as its bits."""
    if src_type == "bf16":
        return [(s.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) for s in source_shards(mesh, src, g, rng)]
    return source_shards(mesh, src, g.astype({"f64": np.float64, "f32": np.float32, "f16": np.float16}[src_type]), rng)


@pytest.mark.parametrize("mesh", [[2], [2, 2]], ids=lambda m: "x".join(map(str, m)))
def test_conversion_in_batches(mesh):
    """A set mixing two conversion pairs and tensors that keep their dtype: run_host_batch runs one batch per pair and
    one for the rest; every element of every member checked."""
    rng = np.random.default_rng(len(mesh))
    pairs = [("bf16", "f8e4m3"), ("f32", "f32"), ("f32", "bf16"), ("bf16", "f8e4m3"), ("f16", "f16"), ("f32", "bf16")]
    lays = [lay for lay in layouts(mesh)]
    tensors, expected = [], []
    for i, (src_type, to) in enumerate(pairs * 2):
        src, dst = lays[(3 * i) % len(lays)], lays[(5 * i + 1) % len(lays)]
        if "P" in dst and to != src_type:
            dst = ["R"] * len(mesh)
        shape = [3 + i % 3, 5]
        g = np.round(global_tensor(shape, np.float64, rng) / 2.5 * 2) / 2  # halves in [-8, 8]: exact in every type
        t = {"src": src, "dst": dst, "shards": source_of(g, src_type, mesh, src, rng), "shape": shape,
             "dtype": src_type}
        if to != src_type:
            t["to_dtype"] = to
        tensors.append(t)
        expected.append((dst, converted(g, to) if to != src_type else converted(g, src_type)))
    progress = []
    outs = reshard.run_host_batch(mesh, tensors, progress=progress.append)
    assert [p.groups for p in progress] == [3, 3, 3]
    checked = sum(check_result(mesh, dst, want, o) for (dst, want), o in zip(expected, outs))
    assert checked > 0


def test_conversion_in_a_batch_between_meshes():
    """Training ranks 0,1 -> serving ranks 2,3, a bf16 -> f8e4m3 batch and an f32 tensor kept, as move_state_dict runs
    a weight sync; every element of every serving rank checked (ranks outside the target get None)."""
    rng = np.random.default_rng(7)
    tensors, wanted = [], []
    for shape, src_type, to, dst in [([6, 5], "bf16", "f8e4m3", "S1"), ([7, 4], "bf16", "f8e4m3", "R"),
                                     ([5, 3], "f32", None, "S0")]:
        g = np.round(global_tensor(shape, np.float64, rng) / 2.5 * 2) / 2
        shards = source_of(g, src_type, [2], ["S0"], rng) + [None, None]
        t = {"src": "S0", "dst": dst, "shards": shards, "shape": shape, "dtype": src_type}
        if to:
            t["to_dtype"] = to
        tensors.append(t)
        want = converted(g, to or src_type)
        parts = {"R": [want, want], "S0": np.array_split(want, 2, axis=0), "S1": np.array_split(want, 2, axis=1)}
        wanted.append(parts[dst])
    outs = reshard.run_host_batch([2], tensors, ranks=[0, 1], dst_mesh=[2], dst_ranks=[2, 3], world_size=4)
    for got, want in zip(outs, wanted):
        assert got[0] is None and got[1] is None
        for g_, w in zip(got[2:], want):
            assert g_.dtype == w.dtype and np.array_equal(g_, w)


def test_partial_sources_reduce_within_nodes_first():
    """(4) P -> R over two nodes of two: a hierarchical all_reduce (reduce_scatter on the node, all_reduce of the
    halves across, all_gather on the node) crosses between nodes the least the layouts require, every element right."""
    p = reshard.plan([4], "P", "R", [1024, 1024], "f32", ranks_per_node=2)
    j = json.loads(p.json())
    assert j["steps"][0].get("hierarchical") is True and "all_reduce/hierarchical" in j["candidates"][0]["route"]
    assert j["inter_node_bytes"] == j["min_inter_node_bytes"] == 2 * 1024 * 1024 * 4
    rng = np.random.default_rng(5)
    parts = [rng.integers(-50, 50, (1024, 1024)).astype(np.float32) for _ in range(4)]
    outs = reshard.run_host([4], "P", "R", parts, ranks_per_node=2)
    want = parts[0] + parts[1] + parts[2] + parts[3]
    assert all(np.array_equal(o, want) for o in outs)
