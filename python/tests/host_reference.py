"""Ground truth for run_host tests: a global tensor, every rank's source shard (Partial contributions that reduce to
the global values exactly), and a check of every element of every rank's result."""

import numpy as np

import reshard


def rank_boxes(mesh, placements, shape):
    lay = reshard.layout(mesh, placements, shape)
    return [(r["coord"], r["global_offset"], r["local_shape"]) for r in lay["ranks"]]


def region(offset, local_shape):
    return tuple(slice(o, o + s) for o, s in zip(offset, local_shape))


def partial_dims(placements):
    return [m for m, p in enumerate(placements) if p.startswith("P")]


def reduce_op(placements):
    ops = {p[2:-1] if "(" in p else "sum" for p in placements if p.startswith("P")}
    assert len(ops) <= 1
    return ops.pop() if ops else None


def groups(boxes, pdims):
    """Ranks grouped by their coordinates on the non-Partial mesh dims (they hold the same box)."""
    out = {}
    for r, (coord, _, _) in enumerate(boxes):
        key = tuple(c for m, c in enumerate(coord) if m not in pdims)
        out.setdefault(key, []).append(r)
    return out


def global_tensor(shape, dtype, rng):
    if np.dtype(dtype).kind == "u":
        g = rng.integers(40, 100, size=shape)
    else:
        g = rng.integers(-20, 20, size=shape)
    if np.dtype(dtype).kind == "c":
        return (g + 1j * rng.integers(-20, 20, size=shape)).astype(dtype)
    return g.astype(dtype)


def source_shards(mesh, placements, g, rng):
    """Every rank's source local tensor for a global tensor g (placements: canonical strings)."""
    boxes = rank_boxes(mesh, placements, list(g.shape))
    pdims = partial_dims(placements)
    op = reduce_op(placements)
    shards = [np.ascontiguousarray(g[region(off, shp)]) for _, off, shp in boxes]
    if not pdims:
        return shards
    for members in groups(boxes, pdims).values():
        base = shards[members[0]].copy()
        others = members[1:]  # members[0] has coordinate 0 on every Partial dim (row-major order)
        for r in others:
            noise = rng.integers(0, 5, size=base.shape)
            if op in ("sum", "avg"):
                shards[r] = (noise - 2).astype(g.dtype) if g.dtype.kind != "u" else noise.astype(g.dtype)
            elif op == "max":
                shards[r] = (base - noise.astype(g.dtype)).astype(g.dtype) if g.dtype.kind != "u" else np.minimum(
                    base, noise.astype(g.dtype))
            else:
                shards[r] = (base + noise.astype(g.dtype)).astype(g.dtype)
        if op == "sum":
            shards[members[0]] = (base - sum(shards[r] for r in others)).astype(g.dtype) if others else base
        elif op == "avg":
            shards[members[0]] = (base * len(members) - sum(shards[r] for r in others)).astype(g.dtype)
        else:
            shards[members[0]] = base
    return shards


def check_result(mesh, placements, g, outs):
    """Every element of every rank's result: the global values in its box; for Partial targets, the group's
    reduction equals them. Returns the number of elements checked."""
    boxes = rank_boxes(mesh, placements, list(g.shape))
    assert len(outs) == len(boxes)
    checked = 0
    for r, (_, off, shp) in enumerate(boxes):
        assert list(outs[r].shape) == shp, f"rank {r}: shape {outs[r].shape}, expected {shp}"
        assert outs[r].dtype == g.dtype
    pdims = partial_dims(placements)
    op = reduce_op(placements)
    for members in groups(boxes, pdims).values():
        _, off, shp = boxes[members[0]]
        want = g[region(off, shp)]
        if not pdims:
            for r in members:
                wrong = np.count_nonzero(outs[r] != want)
                assert wrong == 0, f"rank {r}: {wrong} wrong elements of {want.size}"
        else:
            got = reduce_group([outs[r] for r in members], op, g.dtype)
            wrong = np.count_nonzero(got != want)
            assert wrong == 0, f"ranks {members}: their {op} has {wrong} wrong elements of {want.size}"
        checked += sum(outs[r].size for r in members)
    return checked


def reduce_group(vals, op, dtype):
    if op == "sum":
        return sum(vals[1:], vals[0].copy())
    if op == "avg":
        if np.dtype(dtype).kind in "fc":
            return sum(vals[1:], vals[0].copy()) / len(vals)
        return (sum(v.astype(np.int64) for v in vals) // len(vals)).astype(dtype)
    if op == "max":
        return np.maximum.reduce(vals)
    return np.minimum.reduce(vals)
