"""Block-scaled fp8 and sender-side narrowing in the move, on the host backend (run_host_batch's "block_scale" and
"to_dtype"): the routes of reshard/_sync_request.py (which side converts), every code and scale of every target rank
against a NumPy computation of the rule from the global tensor (docs/python.md, reshard/block_scale.hpp), and the
one-line refusals."""

import numpy as np
import pytest

import reshard
from reshard import _sync_request as rules

LARGEST = {"f8e4m3": 448.0, "f8e5m2": 57344.0}


def fp8_values(kind):
    """Every code's value (NaN for NaN codes, inf for infinities), indexed by code."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if kind == "f8e4m3":
        exp, man, bias, mbits = (codes >> 3) & 0xF, codes & 0x7, 7, 3
        special = (exp == 15) & (man == 7)
    else:
        exp, man, bias, mbits = (codes >> 2) & 0x1F, codes & 0x3, 15, 2
        special = exp == 31
    frac = man / 2.0**mbits
    v = sign * np.where(exp == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (exp - bias.__int__()))
    v[special] = np.nan
    if kind == "f8e5m2":
        v[[0x7C, 0xFC]] = [np.inf, -np.inf]
    return v


def fp8_encode(x, kind):
    """float32 values -> fp8 codes, round to nearest even (ties to the even code), as PyTorch's .to() rounds; values
    past the largest finite one by more than half a step become NaN (e4m3), by half a step or more infinity (e5m2)."""
    table = fp8_values(kind)
    top = 0x7E if kind == "f8e4m3" else 0x7B
    vals = table[:top + 1]  # the non-negative finite values, increasing with the code
    a = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(vals, a), 1, top)
    lo = hi - 1
    d_lo, d_hi = a - vals[lo], vals[hi] - a
    code = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a >= vals[top], top, code)
    step = vals[top] - vals[top - 1]
    # The tie just past the largest finite value goes to the even code: e4m3's largest (0x7E), e5m2's infinity (0x7C).
    past = a > vals[top] + step / 2 if kind == "f8e4m3" else a >= vals[top] + step / 2
    code = np.where(past, 0x7F if kind == "f8e4m3" else 0x7C, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def as_float32(g, dtype):
    if dtype == "bf16":
        return (g.astype(np.uint32) << 16).view(np.float32)
    return g.astype(np.float32)


def quantized(g, dtype, to, block):
    """The rule on the global tensor: (codes, scale_inv)."""
    x = as_float32(g, dtype)
    m, n = x.shape
    gm, gn = -(-m // block), -(-n // block)
    padded = np.zeros((gm * block, gn * block), np.float32)
    padded[:m, :n] = np.abs(x)
    amax = padded.reshape(gm, block, gn, block).max(axis=(1, 3))
    s = (amax / np.float32(LARGEST[to])).astype(np.float32)
    s[s == 0] = 1
    full = np.repeat(np.repeat(s, block, 0), block, 1)[:m, :n]
    return fp8_encode((x / full).astype(np.float32), to), s


def global_tensor(shape, dtype, rng):
    """Blocks of very different magnitudes, some all zero."""
    x = rng.standard_normal(shape).astype(np.float32)
    rows = np.arange(shape[0])[:, None]
    cols = np.arange(shape[1])[None, :]
    x *= np.float32(2.0) ** (((rows // 16 + cols // 24) % 9) - 4).astype(np.float32)
    x[(rows // 32 + cols // 32) % 7 == 6] = 0
    if dtype == "bf16":
        u = x.view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return x.astype({"f32": np.float32, "f16": np.float16, "f64": np.float64}[dtype])


def shards_of(g, mesh, placements, positions_to_ranks=None, world=None):
    lay = reshard.layout(mesh, placements, list(g.shape))
    out = [None] * (world or len(lay["ranks"]))
    for position, r in enumerate(lay["ranks"]):
        sl = tuple(slice(o, o + s) for o, s in zip(r["global_offset"], r["local_shape"]))
        rank = position if positions_to_ranks is None else positions_to_ranks[position]
        out[rank] = np.ascontiguousarray(g[sl])
    return out


def check_block_scaled(g, dtype, to, block, mesh, placements, outs, positions_to_ranks=None):
    """Every code and scale of every target rank against the rule on the global tensor; returns elements checked."""
    codes, scales = quantized(g, dtype, to, block)
    want_c = shards_of(codes, mesh, placements, positions_to_ranks, len(outs))
    want_s = shards_of(scales, mesh, placements, positions_to_ranks, len(outs))
    checked = 0
    for r, o in enumerate(outs):
        if want_c[r] is None:
            assert o is None, f"rank {r} is outside the target mesh"
            continue
        c, s = o
        assert c.dtype == np.uint8 and s.dtype == np.float32
        np.testing.assert_array_equal(c, want_c[r], err_msg=f"rank {r}'s codes")
        np.testing.assert_array_equal(s, want_s[r], err_msg=f"rank {r}'s scales")
        checked += c.size + s.size
    return checked


# (source mesh, source placements, target mesh, target placements, shape, block, the route taken)
SAME_MESH = [
    ([2], "S0", [2], "S1", (256, 512), 128, "block_sender"),  # FSDP -> column-wise TP
    ([2], "S0", [2], "R", (255, 200), 128, "block_sender"),  # partial edge blocks, uneven rows
    ([2, 2], "S0,S1", [2, 2], "R,S0", (512, 256), 128, "block_sender"),
    ([2, 2], "SS0/2,S0", [2, 2], "S1,R", (512, 256), 64, "block_sender"),  # FSDP2 + TP's _StridedShard
    ([3], "S0", [3], "S1", (384, 384), 128, "block_sender"),
    ([3], "S1", [3], "R", (100, 384), 128, "block_sender"),
    ([2], "P", [2], "S0", (256, 130), 128, "block_receiver"),  # a Partial source is reduced first
    ([2], "R", [2], "S1", (64, 512), 128, "block_receiver"),  # a replicated source is quantized once per target
    ([3], "S0", [3], "R", (256, 64), 32, "block_receiver"),  # the source's rows end at 86 and 172: not whole blocks
    ([2, 2], "S0,R", [2, 2], "S1,S0", (128, 256), 64, "block_receiver"),
]


@pytest.mark.parametrize("case", SAME_MESH, ids=lambda c: f"{c[1]}_to_{c[3]}_{c[4][0]}x{c[4][1]}_b{c[5]}")
@pytest.mark.parametrize("pair", [("bf16", "f8e4m3"), ("f32", "f8e5m2"), ("f16", "f8e4m3")], ids="_to_".join)
def test_block_scaled_targets_on_one_mesh(case, pair):
    mesh, src, _, dst, shape, block, route = case
    dtype, to = pair
    g = global_tensor(shape, dtype, np.random.default_rng(sum(shape) + block))
    side = lambda p: rules.Side(tuple(mesh), (), tuple(reshard._core.normalize_placements(p, 2)))
    assert rules.conversion_route("w", side(src), side(dst), shape, dtype, to, block) == route
    if src == "P":  # contributions that sum to g exactly: g and zeros
        shards = [g] + [np.zeros_like(g) for _ in range(int(np.prod(mesh)) - 1)]
    else:
        shards = shards_of(g, mesh, src)
    outs = reshard.run_host_batch(mesh, [{"src": src, "dst": dst, "shards": shards, "shape": list(shape),
                                          "dtype": dtype, "to_dtype": to, "block_scale": block}])[0]
    assert check_block_scaled(g, dtype, to, block, mesh, dst, outs) > 0


def test_training_ranks_to_serving_ranks_with_other_tensors_in_the_batch():
    """FSDP on ranks 0,1 -> TP on ranks 2,3: two block-scaled weights (sender route: codes and scales cross), a bf16
    norm kept, and an f32 tensor narrowed to bf16 on the senders, in one call; every element of every rank."""
    rng = np.random.default_rng(7)
    w1, w2 = global_tensor((512, 256), "bf16", rng), global_tensor((256, 512), "bf16", rng)
    norm = global_tensor((384, 1), "bf16", rng)
    f = rng.standard_normal((256, 64)).astype(np.float32)
    src_ranks, dst_ranks = [0, 1], [2, 3]
    tensors = [
        {"src": "S0", "dst": "S0", "shards": shards_of(w1, [2], "S0", src_ranks, 4), "dtype": "bf16",
         "to_dtype": "f8e4m3", "block_scale": 128},
        {"src": "S0", "dst": "S1", "shards": shards_of(w2, [2], "S0", src_ranks, 4), "dtype": "bf16",
         "to_dtype": "f8e4m3", "block_scale": 128},
        {"src": "S0", "dst": "R", "shards": shards_of(norm, [2], "S0", src_ranks, 4), "dtype": "bf16"},
        {"src": "S0", "dst": "S1", "shards": shards_of(f, [2], "S0", src_ranks, 4), "to_dtype": "bf16"},
    ]
    seen = []
    outs = reshard.run_host_batch([2], tensors, ranks=src_ranks, dst_mesh=[2], dst_ranks=dst_ranks, world_size=4,
                                  progress=seen.append)
    assert check_block_scaled(w1, "bf16", "f8e4m3", 128, [2], "S0", outs[0], dst_ranks) == 512 * 256 + 8
    assert check_block_scaled(w2, "bf16", "f8e4m3", 128, [2], "S1", outs[1], dst_ranks) == 256 * 512 + 8
    assert outs[2][:2] == [None, None] and all(np.array_equal(o, norm) for o in outs[2][2:])
    u = f.view(np.uint32)
    f_bf16 = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    assert np.array_equal(outs[3][2], f_bf16[:, :32]) and np.array_equal(outs[3][3], f_bf16[:, 32:])
    assert seen[-1].tensors_done == 4 and seen[-1].bytes_done == seen[-1].bytes_total


def test_narrowing_on_the_sender_gives_the_receivers_values():
    """A narrower target converts on the senders where each element sits on one rank, else on the receivers: the same
    values either way (fp8 by the rule's rounding, including ties and values past the largest)."""
    g = np.concatenate([np.random.default_rng(3).standard_normal((60, 8)).astype(np.float32) * 50,
                        np.array([[0.0, -0.0, 448.0, 464.0, 1e6, 0.0009765625 * 1.5, 13.0, 2.0**-9]], np.float32)])
    want = fp8_encode(g, "f8e4m3")
    side = lambda p: rules.Side((2,), (0, 1), (p,))
    for src, route in [("S0", "sender"), ("R", "receiver"), ("P", "receiver")]:
        assert rules.conversion_route("x", side(src), side("S1"), g.shape, "f32", "f8e4m3") == route
        shards = shards_of(g, [2], src) if src != "P" else [g, np.full_like(g, -0.0)]  # x + -0 is x, -0 too
        outs = reshard.run_host_batch([2], [{"src": src, "dst": "S1", "shards": shards, "to_dtype": "f8e4m3"}])[0]
        assert np.array_equal(outs[0], want[:, :4]) and np.array_equal(outs[1], want[:, 4:]), src
    # Nothing crosses between ranks (each target box within its rank's source box): the local copy converts.
    for src, dst in [("S1", "S1"), ("R", "S1")]:
        assert rules.conversion_route("x", side(src), side(dst), g.shape, "f32", "f8e4m3") == "receiver", src
        outs = reshard.run_host_batch([2], [{"src": src, "dst": dst, "shards": shards_of(g, [2], src),
                                             "to_dtype": "f8e4m3"}])[0]
        assert np.array_equal(outs[0], want[:, :4]) and np.array_equal(outs[1], want[:, 4:]), src
    assert rules.stays_on_rank(side("S1"), side("S1"), g.shape) and not rules.stays_on_rank(side("S0"), side("S1"),
                                                                                              g.shape)
    assert not rules.stays_on_rank(side("S1"), rules.Side((2,), (2, 3), ("S1",)), g.shape)  # other ranks
    assert rules.stays_on_rank(side("S1"), rules.Side((1, 2), (0, 1), ("R", "S1")), g.shape)  # another mesh shape
    assert not rules.stays_on_rank(side("S1"), rules.Side((2,), (1, 0), ("S1",)), g.shape)  # ranks swapped
    assert rules.conversion_route("x", side("S0"), side("S1"), g.shape, "bf16", "f32") == "receiver"  # wider
    assert rules.conversion_route("x", side("S0"), side("S1"), g.shape, "bf16", "bf16") == "keep"


def test_block_scaling_refusals_name_the_tensor_in_one_line():
    g = np.zeros((256, 256), np.float32)
    base = {"src": "S0", "dst": "S1", "shards": [g[:128], g[128:]], "to_dtype": "f8e4m3"}
    cases = [
        ({"to_dtype": "bf16", "block_scale": 128}, "tensor 0: block scales quantize into f8e4m3 (float8_e4m3fn)"),
        ({"block_scale": 0}, "tensor 0: the scale block is a whole number of elements from 1 to 4096, got 0"),
        ({"block_scale": 5000}, "from 1 to 4096, got 5000"),
        ({"block_scale": "128"}, "got '128'"),
        ({"block_scale": True}, "got True"),
        ({"block_scale": 96}, "tensor 0: the target does not hold whole 96x96 blocks (rank 0's columns end at 128, "
                              "neither a multiple of the block 96 nor the tensor's end 256)"),
        ({"shards": [g[:128].reshape(-1), g[128:].reshape(-1)], "src": "S0", "dst": "S0", "block_scale": 128},
         "tensor 0: block scales apply to 2-D tensors, not to shape [65536]"),
        ({"to_dtype": "i8"}, "tensor 0: cannot convert f32 to i8"),
    ]
    for change, needle in cases:
        with pytest.raises(ValueError) as e:
            reshard.run_host_batch([2], [{**base, **change}])
        assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="block_scale"):
        reshard.run_host_batch([2], [{**base, "block_scales": 128}])


def test_quantizer_input_is_checked():
    with pytest.raises(ValueError, match="2-D"):
        reshard._core.quantize_blocks(np.zeros(8, np.float32), "f32", "f8e4m3", 4)
    with pytest.raises(ValueError, match="4-byte elements"):
        reshard._core.quantize_blocks(np.zeros((2, 2), np.float64), "f32", "f8e4m3", 4)
    with pytest.raises(ValueError, match="C-contiguous"):
        reshard._core.quantize_blocks(np.zeros((4, 4), np.float32)[:, ::2], "f32", "f8e4m3", 4)
    with pytest.raises(ValueError, match="quantizes f64, f32, f16 or bf16"):
        reshard._core.quantize_blocks(np.zeros((2, 2), np.int32), "i32", "f8e4m3", 4)


def test_the_budget_counts_the_routes_staging():
    """Under a memory budget the senders' codes and scales (block_sender) and narrowed tensors (sender) count with the
    plans' workspace: a budget that fits the plans but not the staging cuts the set into more groups, and a tensor
    whose staging alone exceeds it is refused by name."""
    g = global_tensor((256, 256), "f32", np.random.default_rng(1))
    shards = shards_of(g, [2], "S0")
    tensor = {"src": "S0", "dst": "S1", "shards": shards, "to_dtype": "f8e4m3", "block_scale": 128}
    side = lambda p: rules.Side((2,), (), (p,))
    pieces = rules.pieces("block_sender", (256, 256), "f32", "f8e4m3", 128)
    held = [rules.held_bytes(p, "block_sender", side("S0"), side("S1"), (256, 256), "f32", "f8e4m3", 128)
            for p in pieces]
    assert held == [128 * 256 + 2 * 4, 2 * 4]  # rank 0's codes and its two blocks' scales; the scales alone
    assert rules.held_bytes(rules.Piece("data", "bf16", None, (256, 256)), "sender", side("S0"), side("S1"),
                            (256, 256), "f32", "bf16") == 128 * 256 * 2
    groups = []
    outs = reshard.run_host_batch([2], [tensor, tensor], memory_budget=1 << 20, progress=groups.append)
    assert groups[-1].groups == 1
    for o in outs:
        check_block_scaled(g, "f32", "f8e4m3", 128, [2], "S1", o)
    groups.clear()
    outs = reshard.run_host_batch([2], [tensor, tensor], memory_budget=3 * 128 * 256 // 2, progress=groups.append)
    assert groups[-1].groups > 1
    for o in outs:
        check_block_scaled(g, "f32", "f8e4m3", 128, [2], "S1", o)
    with pytest.raises(ValueError, match="needs .* bytes of workspace per rank alone"):
        reshard.run_host_batch([2], [tensor, tensor], memory_budget=128 * 256)
