#!/usr/bin/env python3
"""Writes tests/data/pytorch_strided_layouts.json: PyTorch's own layouts of _StridedShard placements.

Needs PyTorch (2.11 for the committed fixture) but no GPU and no process launcher: it calls
torch.distributed.tensor._utils._compute_local_shape_and_global_offset with plain mesh shapes and coordinates,
and (unless --no-redistribute) redistributes an index tensor from Replicate to the placements under a fake process
group with LocalTensorMode, which runs every rank of the mesh in this process, to record which global indices each
rank really holds. It checks that redistributing back to Replicate gives the original tensor.

    python3 tests/data/make_strided_fixture.py --out tests/data/pytorch_strided_layouts.json

Format (tests/data/pytorch_layouts_dev.json's, plus two fields):
  {"source": "...", "cases": [{"mesh": [2, 2], "placements": ["SS0/2", "S0"],
     "torch_placements": "(_StridedShard(dim=0, sf=2), Shard(dim=0))", "global_shape": [8, 3],
     "ranks": [{"coord": [0, 0], "local_shape": [2, 3], "global_offset": [0, 0],
                "indices": [[[0, 2]], [[0, 3]]]}, ...]}]}
"indices" lists, per tensor dim, the half-open ranges of global indices the rank holds, in local order (adjacent
ones merged); it is absent when --no-redistribute is given or the redistribution is not available, and
"redistribute_error" says why when PyTorch refused to redistribute that case.
"""
import argparse
import itertools
import json
import math
import random
import sys

MESHES = [(2,), (3,), (4,), (2, 2), (2, 3), (3, 2), (4, 2), (2, 4), (1, 4), (4, 1), (2, 2, 2), (2, 3, 2), (3, 2, 2)]
EXTENTS = [0, 1, 2, 3, 5, 6, 7, 8, 12, 13, 16, 24]


def reshard_text(p):
    """reshard's canonical text of a placement spec ("R", "S0", "SS0/2", "P")."""
    kind = p[0]
    if kind == "R":
        return "R"
    if kind == "P":
        return "P"
    if kind == "S":
        return f"S{p[1]}"
    return f"SS{p[1]}/{p[2]}"


def cases(count, seed):
    """Placement specs per case: ("R",), ("P",), ("S", d), ("SS", d, split_factor); at least one _StridedShard."""
    rng = random.Random(seed)
    out = []
    # FSDP2 + TP and its relatives first: (SS(d, product of later sizes), S(d), ...) on every mesh, several shapes.
    for mesh in MESHES:
        if len(mesh) < 2:
            continue
        for d in (0, 1):
            for shape in ((8, 6), (7, 5), (24, 13), (5, 16), (3, 2)):
                tail = math.prod(mesh[1:])
                out.append((mesh, [("SS", d, tail)] + [("S", d)] * (len(mesh) - 1), shape))
                if len(mesh) == 3:
                    out.append((mesh, [("R",), ("SS", d, mesh[2]), ("S", d)], shape))
                    out.append((mesh, [("SS", d, mesh[1] * mesh[2]), ("S", d), ("S", d)], shape))
    # Then random ones: meshes up to 3-D, 1-3 tensor dims, uneven extents, split factors 2-4, Shard/Replicate mixed.
    while len(out) < count:
        mesh = rng.choice(MESHES)
        ndim = rng.randint(1, 3)
        shape = tuple(rng.choice(EXTENTS) for _ in range(ndim))
        ps = []
        for _ in mesh:
            r = rng.random()
            if r < 0.2:
                ps.append(("R",))
            elif r < 0.25:
                ps.append(("P",))
            elif r < 0.55:
                ps.append(("S", rng.randrange(ndim)))
            else:
                ps.append(("SS", rng.randrange(ndim), rng.randint(2, 4)))
        if not any(p[0] == "SS" for p in ps):
            continue
        out.append((mesh, ps, shape))
    return out[:count]


def to_ranges(indices):
    """[0, 1, 2, 5, 6] -> [[0, 3], [5, 7]] (local order kept; adjacent indices merged)."""
    ranges = []
    for i in indices:
        if ranges and ranges[-1][1] == i:
            ranges[-1][1] = i + 1
        else:
            ranges.append([i, i + 1])
    return ranges


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=320)
    ap.add_argument("--seed", type=int, default=2011)
    ap.add_argument("--no-redistribute", action="store_true", help="skip the LocalTensorMode redistribution")
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset
    from torch.distributed.tensor.placement_types import _StridedShard

    def torch_placement(p):
        if p[0] == "R":
            return Replicate()
        if p[0] == "P":
            return Partial()
        if p[0] == "S":
            return Shard(p[1])
        return _StridedShard(p[1], split_factor=p[2])

    redistribute = None
    if not args.no_redistribute:
        try:
            from torch.distributed._local_tensor import LocalTensor, LocalTensorMode
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.tensor import DTensor
            from torch.testing._internal.distributed.fake_pg import FakeStore

            def redistribute(mesh_shape, placements, shape):
                """Per rank, the global indices it holds per tensor dim after R -> placements (Partial taken as R)."""
                world = math.prod(mesh_shape)
                if dist.is_initialized():
                    dist.destroy_process_group()
                dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
                try:
                    numel = math.prod(shape)
                    full = torch.arange(numel, dtype=torch.int64).reshape(shape)
                    data_placements = [Replicate() if isinstance(p, Partial) else p for p in placements]
                    with LocalTensorMode(world):
                        mesh = DeviceMesh("cpu", torch.arange(world).view(mesh_shape))
                        rep = LocalTensor({r: full.clone() for r in range(world)})
                        dt = DTensor.from_local(rep, mesh, [Replicate()] * len(mesh_shape))
                        dt = dt.redistribute(mesh, data_placements)
                        back = dt.redistribute(mesh, [Replicate()] * len(mesh_shape))
                        locals_ = {r: t.clone() for r, t in dt._local_tensor._local_tensors.items()}
                        fulls = {r: t.clone() for r, t in back._local_tensor._local_tensors.items()}
                finally:
                    dist.destroy_process_group()
                for r, t in fulls.items():
                    assert torch.equal(t, full), f"redistribute back to Replicate differs on rank {r}"
                held = {}
                for r, t in locals_.items():
                    per_dim = []
                    for d in range(len(shape)):
                        if t.numel() == 0:
                            per_dim.append([])
                            continue
                        idx = [0] * len(shape)
                        coords = []
                        for i in range(t.shape[d]):
                            idx[d] = i
                            g = int(t[tuple(idx)])
                            coords.append((g // math.prod(shape[d + 1:])) % shape[d])
                        per_dim.append(coords)
                    # The local tensor is exactly the product of its per-dim index lists.
                    want = full
                    for d, coords in enumerate(per_dim):
                        want = want.index_select(d, torch.tensor(coords, dtype=torch.int64))
                    assert t.numel() == 0 or torch.equal(t, want), f"rank {r}: not a product of index lists"
                    held[r] = per_dim
                return held
        except ImportError as e:
            print(f"LocalTensorMode redistribution unavailable ({e}); writing shapes and offsets only",
                  file=sys.stderr)
            redistribute = None

    out_cases = []
    failures = 0
    disagreements = 0
    for mesh_shape, specs, shape in cases(args.cases, args.seed):
        placements = [torch_placement(p) for p in specs]
        held, error = None, None
        if redistribute:
            try:
                held = redistribute(mesh_shape, placements, shape)
            except Exception as e:  # PyTorch may refuse a redistribution; the shapes and offsets still count
                error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                failures += 1
        ranks = []
        for linear, coord in enumerate(itertools.product(*[range(n) for n in mesh_shape])):
            local_shape, global_offset = _compute_local_shape_and_global_offset(
                list(shape), list(mesh_shape), list(coord), placements)
            entry = {"coord": list(coord), "local_shape": [int(x) for x in local_shape],
                     "global_offset": [int(x) for x in global_offset]}
            if held is not None:
                entry["indices"] = [to_ranges(ix) for ix in held[linear]]
                # PyTorch's own two answers can disagree on uneven strided layouts: record it, never hide it.
                if [len(ix) for ix in held[linear]] != entry["local_shape"]:
                    entry["indices_disagree_with_local_shape"] = True
                    disagreements += 1
            ranks.append(entry)
        case = {"mesh": list(mesh_shape), "placements": [reshard_text(p) for p in specs],
                "torch_placements": repr(tuple(placements)), "global_shape": list(shape), "ranks": ranks}
        if error:
            case["redistribute_error"] = error
        out_cases.append(case)

    source = f"torch {torch.__version__} _compute_local_shape_and_global_offset"
    if redistribute:
        source += " + DTensor.redistribute under LocalTensorMode (indices)"
    with open(args.out, "w") as f:
        json.dump({"source": source, "cases": out_cases}, f, separators=(",", ":"))
        f.write("\n")
    if failures:
        print(f"{failures} cases could not be redistributed (see redistribute_error)", file=sys.stderr)
    if disagreements:
        print(f"{disagreements} ranks hold data whose extent differs from _compute_local_shape_and_global_offset "
              "(indices_disagree_with_local_shape)", file=sys.stderr)
    print(f"wrote {len(out_cases)} cases ({sum(len(c['ranks']) for c in out_cases)} ranks) to {args.out}; {source}")


if __name__ == "__main__":
    main()
