"""run_host_batch: several tensors of mixed dtypes, layouts and sizes on one mesh in one executor call per rank,
every element of every tensor of every rank checked."""

import itertools
import zlib

import numpy as np
import pytest

import reshard
from host_reference import check_result, global_tensor, source_shards

KINDS = ["R", "S0", "S1", "P"]
SHAPES = [[4, 0], [1, 1], [3, 5], [8, 6]]
DTYPES = [np.float32, np.int64, np.uint8, np.float64]


@pytest.mark.parametrize("mesh", [[2], [4], [2, 2]], ids=lambda m: "x".join(map(str, m)))
def test_mixed_batch(mesh):
    rng = np.random.default_rng(zlib.crc32(repr(mesh).encode()))
    layouts = [list(c) for c in itertools.product(KINDS, repeat=len(mesh))]
    tensors, expected = [], []
    for i in range(24):
        src = layouts[(i * 7) % len(layouts)]
        dst = layouts[(i * 5 + 3) % len(layouts)]
        shape = SHAPES[i % len(SHAPES)]
        g = global_tensor(shape, DTYPES[i % len(DTYPES)], rng)
        tensors.append({"src": src, "dst": dst, "shards": source_shards(mesh, src, g, rng), "shape": shape})
        expected.append((dst, g))
    outs = reshard.run_host_batch(mesh, tensors)
    assert len(outs) == len(tensors)
    checked = sum(check_result(mesh, dst, g, o) for (dst, g), o in zip(expected, outs))
    assert checked > 0


def test_batch_errors():
    g = np.arange(4, dtype=np.float32).reshape(2, 2)
    with pytest.raises(ValueError, match="at least one tensor"):
        reshard.run_host_batch([2], [])
    with pytest.raises(ValueError, match="tensor 0: give src, dst, shards"):
        reshard.run_host_batch([2], [{"src": "S0", "shards": [g[:1], g[1:]]}])
    with pytest.raises(ValueError, match="tensor 1: shard of rank 1 has shape"):
        reshard.run_host_batch([2], [{"src": "S0", "dst": "R", "shards": [g[:1], g[1:]]},
                                     {"src": "S0", "dst": "R", "shards": [g[:1], g], "shape": [2, 2]}])
