"""reshard: plan and execute DTensor redistributions.

    import reshard
    reshard.layout([2, 2], "S0,S1", [8, 8])                  # every rank's local shape and offset
    p = reshard.plan([2, 2], "S0,S1", "S1,S0", [8192, 8192], "bf16")
    p.strategy, p.estimated_us, p.bytes_moved, p.json()
    outs = reshard.run_host([2], "S0", "S1", shards)          # NumPy shards through the executor, on host threads

`reshard.torch` adapts PyTorch DTensors (needs torch and the CUDA build). Bad arguments raise ValueError with the
message the `reshard` CLI prints for the same input; docs/python.md has the reference.
"""

import collections as _collections
import json as _json
import math as _math

import numpy as _np

from . import _args, _between, _shapes
from ._core import Plan, __version__

__all__ = ["Plan", "SyncProgress", "layout", "plan", "run_host", "run_host_batch", "__version__"]


def layout(mesh, placements, shape, *, ranks=None):
    """Every rank's local shard, as `reshard layout --json` prints it (a dict).

    {"mesh": [..], "placements": [..], "global_shape": [..],
     "ranks": [{"rank": r, "coord": [..], "local_shape": [..], "global_offset": [..]}, ...]}

    `ranks`: an explicit rank at each row-major mesh coordinate (the CLI's --ranks).
    """
    text = _core_layout_json(mesh, placements, shape, ranks)
    return _json.loads(text)


def _core_layout_json(mesh, placements, shape, ranks):
    from . import _core

    return _core.layout_json(
        _args.mesh_text(mesh), _rank_list(ranks), _args.placements_text(placements), _args.shape_arg(shape)
    )


def _rank_list(ranks, name="ranks"):
    if ranks is None:
        return None
    if isinstance(ranks, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of ints, got {type(ranks).__name__}")
    return [_args.integer(f"{name}[{i}]", r) for i, r in enumerate(ranks)]


def _plan_args(mesh, src, dst, shape, dtype, strategy, memory_budget, transport, ranks_per_node, profile, ranks,
               allow_scalar=False, fuse="auto", low_sm=False, max_collectives=None, pipeline_chunk=None,
               buffers_change=False, relay=None):
    from . import _core

    a = _core.PlanArgs()
    a.mesh = _args.mesh_text(mesh)
    a.ranks = _rank_list(ranks)
    a.src = _args.placements_text(src)
    a.dst = _args.placements_text(dst)
    a.shape = _args.shape_arg(shape, allow_scalar=allow_scalar)
    a.dtype = _args.dtype_name(dtype)
    a.options = _args.plan_options(strategy=strategy, transport=transport, fuse=fuse, low_sm=low_sm,
                                   memory_budget=memory_budget, ranks_per_node=ranks_per_node, profile=profile,
                                   max_collectives=max_collectives, pipeline_chunk=pipeline_chunk,
                                   buffers_change=buffers_change, relay=relay)
    return a


def plan(mesh, src, dst, shape, dtype="f32", strategy="auto", memory_budget=None, *, transport="auto",
         ranks_per_node=8, profile=None, ranks=None, rank=None, fuse="auto", low_sm=False, dst_mesh=None,
         dst_ranks=None, world_size=None, buffers_change=False, max_collectives=None, pipeline_chunk=None,
         to_dtype=None, relay=None):
    """Plans a redistribution as `reshard plan` does; returns a Plan.

    plan.json() is exactly what `reshard plan --json` prints for the same arguments; plan.strategy,
    plan.estimated_us, plan.bytes_moved, plan.peak_workspace_bytes, plan.candidates, plan.table(), plan.svg().
    memory_budget: bytes per rank (an int, or text such as "64MiB"); profile: path of a cost-model profile JSON;
    rank: plan as that rank needs it (only its own transfers), as `--rank`; fuse: "auto", "always" or "never", as
    `--fuse`; low_sm: price SM kernels for running beside compute, as `--low-sm`; buffers_change: plan for tensors
    that change every call (a staged first nvlink step where cheaper), as `--buffers-change` and as reshard.torch plans;
    max_collectives, pipeline_chunk: as `--max-collectives` and `--pipeline-chunk`; relay: "auto", "always" or "never",
    whether p2p steps across nodes forward a region inside a node instead of sending it into it once per rank, as
    `--relay`. These keywords are the plan option
    table's (plan_option_table.hpp), which the CLI's flags come from too: the same names, parsing, ranges and messages.
    Between meshes of one world (as `--from-mesh/--from-ranks/--to-mesh/--to-ranks/--world-size`): `mesh` and `ranks`
    are the source's, dst_mesh and dst_ranks the target's (world ranks in row-major coordinate order; unset: 0..n-1),
    world_size defaults to one more than the largest rank of either; plan.src_mesh and plan.dst_mesh print them.
    to_dtype: the target's element type when it differs from dtype (a floating type; as `--to-dtype`): every element
    converted as `tensor.to(to_dtype)` converts it, by the kernel that writes the target; plan.to_dtype names it.
    """
    from . import _core

    args = _plan_args(mesh, src, dst, shape, dtype, strategy, memory_budget, transport, ranks_per_node, profile, ranks,
                      fuse=fuse, low_sm=low_sm, max_collectives=max_collectives, pipeline_chunk=pipeline_chunk,
                      buffers_change=buffers_change, relay=relay)
    if dst_mesh is not None:
        args.dst_mesh = _args.mesh_text(dst_mesh)
    args.dst_ranks = _rank_list(dst_ranks, "dst_ranks")
    args.world_size = None if world_size is None else _args.integer("world_size", world_size, 1)
    args.to_dtype = None if to_dtype is None else _args.dtype_name(to_dtype)
    return _core.make_plan(args, None if rank is None else _args.integer("rank", rank))


def _mesh_dims(mesh_text):
    return [int(v) for v in mesh_text.split("x")]


def _infer_shape(mesh_text, ranks, placements, shards):
    """The global shape the shards tile: per tensor dim, the local extents summed over the ranks whose coordinates are 0
    on every mesh dim that does not shard that dim (a _StridedShard's ranks, like a Shard's, hold disjoint parts of the
    dim that together make all of it)."""
    dims = _mesh_dims(mesh_text)
    ndim = shards[0].ndim

    def sharded_dim(p):  # "S1" and _StridedShard's "SS1/2" shard dim 1
        return int(p.lstrip("S").split("/")[0]) if p.startswith("S") else None

    sharding = [[m for m, p in enumerate(placements) if sharded_dim(p) == d] for d in range(ndim)]
    shape = [0] * ndim
    for r, shard in enumerate(shards):
        c = _shapes.mesh_coord(r if ranks is None else list(ranks).index(r), dims)
        for d in range(ndim):
            if all(c[m] == 0 for m in range(len(dims)) if m not in sharding[d]):
                shape[d] += shard.shape[d]
    return shape


def _host_request(mesh, src, dst, shards, shape, dtype, strategy, memory_budget, transport, ranks_per_node, ranks, fuse,
                  low_sm, dst_mesh=None, dst_ranks=None, world_size=None, options=None):
    """run_host's arguments checked and converted: (PlanArgs, C-order shards, a function to apply to the outputs).
    options: profile, max_collectives, pipeline_chunk, buffers_change (the plan option table's other rows)."""
    from . import _core

    options = dict(options or {})

    mesh_text = _args.mesh_text(mesh)
    two = _between.between(mesh_text, ranks, dst_mesh, dst_ranks, world_size)
    shards = list(shards)
    if two is not None and len(shards) != two.world:
        raise ValueError(f"the meshes are in a world of {two.world} ranks but {len(shards)} shards were given (one per "
                         "world rank, in rank order; None for ranks outside the source mesh)")
    # Between meshes, ranks outside the source mesh hold nothing: their entries may be None (or empty arrays).
    holders = range(len(shards)) if two is None else [r for r in two.src_ranks if 0 <= r < len(shards)]
    for r in holders:
        shards[r] = _np.asarray(shards[r], order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    held = [shards[r] for r in holders]
    if not held:
        raise ValueError("run_host needs one shard per rank; none were given")
    np_dtype = held[0].dtype
    first = list(holders)[0]
    for r in holders:
        s = shards[r]
        if s.dtype != np_dtype:
            raise ValueError(f"shard of rank {r} has dtype {s.dtype}; rank {first}'s has {np_dtype}")
        if s.ndim != held[0].ndim:
            raise ValueError(f"shard of rank {r} has {s.ndim} dims (shape {list(s.shape)}); rank {first}'s has "
                             f"{held[0].ndim}")
    ndim = held[0].ndim
    src_p = _core.normalize_placements(_args.placements_text(src), ndim)
    dst_p = _core.normalize_placements(_args.placements_text(dst), ndim)
    if shape is None:
        # Check mesh and placements first (the CLI's messages), then add up the source shards in mesh order.
        probe_shape = "x".join(["1"] * ndim) if ndim else []
        mesh_ranks = None if two is None else two.src_ranks
        layout_ranks = _json.loads(_core.layout_json(mesh_text, _rank_list(mesh_ranks), ",".join(src_p),
                                                     probe_shape))["ranks"]
        in_order = held if two is None else [shards[r] for r in two.src_ranks]
        shape = _infer_shape(mesh_text, ranks if two is None else None, src_p, in_order) if len(in_order) == len(
            layout_ranks) else [0] * ndim
    shape_a = _args.shape_arg(shape, allow_scalar=True)
    complex_part = {_np.dtype(_np.complex64): _np.float32, _np.dtype(_np.complex128): _np.float64}.get(np_dtype)
    plan_ndim = ndim
    if complex_part is not None:
        # Complex values move as their parts, which max and min would compare apart: refused, as for complex64 in C++.
        for p in list(src_p) + list(dst_p):
            if p in ("P(max)", "P(min)"):
                raise ValueError(f"{p[:-1].replace('P(', 'Partial(')}) is not supported on {np_dtype} tensors: complex "
                                 "values reduce with sum and avg only")
        shape_a = shape_a + "x2" if shape_a else "2"
        for r in holders:
            shards[r] = shards[r].view(complex_part).reshape(shards[r].shape + (2,))
        plan_ndim += 1
        if dtype is None:
            dtype = _np.dtype(complex_part)
    if two is not None:
        held_set = set(holders)
        for r in range(len(shards)):
            if r not in held_set:
                if shards[r] is not None and _np.asarray(shards[r]).size:
                    raise ValueError(f"rank {r} is not in the source mesh but its shard has "
                                     f"{_np.asarray(shards[r]).size} elements (give None)")
                shards[r] = _np.empty([0] * plan_ndim, dtype=shards[first].dtype)
    args = _plan_args(mesh_text, ",".join(src_p), ",".join(dst_p), shape_a, np_dtype if dtype is None else dtype,
                      strategy, memory_budget, transport, ranks_per_node, options.pop("profile", None), ranks,
                      allow_scalar=True, fuse=fuse, low_sm=low_sm, **options)
    if two is not None:
        args.dst_mesh = None if dst_mesh is None else _args.mesh_text(dst_mesh)
        args.dst_ranks = _rank_list(dst_ranks, "dst_ranks")
        args.world_size = None if world_size is None else _args.integer("world_size", world_size, 1)
    receivers = None if two is None else set(two.dst_ranks)

    def finish(outs):
        if receivers is not None:
            outs = [o if r in receivers else None for r, o in enumerate(outs)]
        if complex_part is not None:
            outs = [None if o is None else o.view(np_dtype).reshape(o.shape[:-1]) for o in outs]
        return outs

    return args, shards, finish


def run_host(mesh, src, dst, shards, *, shape=None, dtype=None, strategy="auto", memory_budget=None,
             transport="auto", ranks_per_node=8, ranks=None, fuse="auto", low_sm=False, dst_mesh=None, dst_ranks=None,
             world_size=None, profile=None, max_collectives=None, pipeline_chunk=None, buffers_change=False,
             to_dtype=None, relay=None):
    """Redistributes NumPy shards on the host backend (one thread per rank) through the executor.

    shards: one array per rank, in rank order, each that rank's source local tensor (C order is made where needed).
    Returns the target local tensors, one array per rank. shape: the global shape (inferred from the shards when
    omitted); dtype: the element type (default: the arrays'; give "bf16" for bfloat16 bits held in uint16 arrays).
    complex64/complex128 arrays move as pairs of f32/f64 (Partial sums and averages act on both parts).
    Between two meshes of one world (as plan() takes them: `mesh` and `ranks` the source's, dst_mesh and dst_ranks the
    target's, world_size): shards has one entry per world rank, None for ranks outside the source mesh; the result
    has one entry per world rank, None for ranks outside the target mesh. The plan options (strategy to
    relay) are plan()'s. to_dtype: the targets' element type, as plan()'s (the result arrays are float64,
    float32 or float16, or for bf16 and fp8 targets their bits in uint16 and uint8 arrays).
    """
    from . import _core

    options = dict(profile=profile, max_collectives=max_collectives, pipeline_chunk=pipeline_chunk,
                   buffers_change=buffers_change, relay=relay)
    args, shards, finish = _host_request(mesh, src, dst, shards, shape, dtype, strategy, memory_budget, transport,
                                         ranks_per_node, ranks, fuse, low_sm, dst_mesh, dst_ranks, world_size, options)
    args.to_dtype = None if to_dtype is None else _args.dtype_name(to_dtype)
    return finish(_core.run_host(args, shards))


SyncProgress = _collections.namedtuple("SyncProgress", "tensors_done tensors_total bytes_done bytes_total group groups")
SyncProgress.__doc__ = """Where a batch run in groups stands (run_host_batch's and reshard.torch.move_state_dict's
progress callback): tensors and bytes (global tensor bytes) done so far, of the total; group (1-based) of groups."""


def run_host_batch(mesh, tensors, *, strategy="auto", memory_budget=None, transport="auto", ranks_per_node=8,
                   ranks=None, fuse="auto", low_sm=False, dst_mesh=None, dst_ranks=None, world_size=None,
                   progress=None, profile=None, max_collectives=None, pipeline_chunk=None, buffers_change=False,
                   relay=None):
    """Redistributes several tensors in one executor call per rank (host backend; a batch).

    tensors: a list of dicts, one per tensor, with "src", "dst" and "shards" (one array per rank, as run_host takes)
    and optionally "shape", "dtype", "to_dtype" (as run_host's) and "block_scale" (block-scaled fp8: to_dtype f8e4m3
    or f8e5m2 quantized per block of that many elements on a side, one float32 scale per block, the target holding
    whole blocks; docs/python.md). Every tensor is planned as run_host would plan it (transport auto runs on NCCL's
    path for more than one tensor), then all of them run as one merged program; a tensor that changes dtype takes the
    route reshard.torch.move_state_dict takes (reshard/_sync_request.py: converted by the receiver's kernel, or by the
    senders before the move where the target is narrower and each element sits on one rank), and a batch converts one
    dtype pair for all its members, so tensors converting another pair run as batches of their own. Returns, per
    tensor, the target local tensors (one array per rank; for a block-scaled tensor (codes, scale_inv) per rank).
    dst_mesh, dst_ranks, world_size: every tensor moves between two meshes (as run_host). memory_budget (bytes per
    rank) holds for the whole set: every tensor is planned within it, and the tensors run in consecutive groups, one
    executor call each, whose merged programs fit it. progress: called after each group with a SyncProgress. The plan
    options (strategy to relay) are plan()'s.
    """
    from . import _core, _sync_request

    options = dict(profile=profile, max_collectives=max_collectives, pipeline_chunk=pipeline_chunk,
                   buffers_change=buffers_change, relay=relay)
    if not tensors:
        raise ValueError("run_host_batch needs at least one tensor")
    members = []  # (tensor, role, PlanArgs, shards, finish)
    held = []  # per member: bytes per rank its route's staging holds (_sync_request.held_bytes)
    posts = {}  # tensor -> what turns its members' outputs into its result
    sizes = []
    for i, t in enumerate(tensors):
        unknown = set(t) - {"src", "dst", "shards", "shape", "dtype", "to_dtype", "block_scale"}
        if unknown or not {"src", "dst", "shards"} <= set(t):
            raise ValueError(f"tensor {i}: give src, dst, shards and optionally shape, dtype, to_dtype and "
                             f"block_scale; got {sorted(t)}")

        def request(shards, shape, dtype, t=t, i=i):
            try:
                return _host_request(mesh, t["src"], t["dst"], shards, shape, dtype, strategy, memory_budget,
                                     transport, ranks_per_node, ranks, fuse, low_sm, dst_mesh, dst_ranks, world_size,
                                     options)
            except ValueError as e:
                raise ValueError(f"tensor {i}: {e}") from None

        args, shards, finish = request(t["shards"], t.get("shape"), t.get("dtype"))
        sizes.append(_global_bytes(args))
        to = args.dtype if t.get("to_dtype") is None else _args.dtype_name(t["to_dtype"])
        shape = tuple(int(v) for v in args.shape.split("x")) if isinstance(args.shape, str) else ()
        src_dims = tuple(_mesh_dims(args.mesh))
        dst_dims = tuple(_mesh_dims(args.dst_mesh or args.mesh))
        src_ranks = tuple(args.ranks) if args.ranks else tuple(range(_math.prod(src_dims)))
        dst_ranks = tuple(args.dst_ranks) if args.dst_ranks else src_ranks if not args.dst_mesh else tuple(
            range(_math.prod(dst_dims)))
        src_side = _sync_request.Side(src_dims, src_ranks, tuple(args.src.split(",")))
        dst_side = _sync_request.Side(dst_dims, dst_ranks, tuple(args.dst.split(",")))
        route = _sync_request.conversion_route(i, src_side, dst_side, shape, args.dtype, to, t.get("block_scale"),
                                               say=lambda name, text: f"tensor {name}: {text}")
        block = t.get("block_scale")
        if route == "keep":
            members.append((i, "data", args, shards, finish))
        elif route == "receiver":
            args.to_dtype = to
            members.append((i, "data", args, shards, finish))
        elif route == "sender":
            moved = _sync_request.pieces(route, shape, args.dtype, to)[0].dtype
            try:
                narrow = [_core.convert_array(s, args.dtype, to) for s in shards]
            except ValueError as e:
                raise ValueError(f"tensor {i}: {e}") from None
            members.append((i, "data", *request(narrow, list(shape), moved)))
        elif route == "block_sender":
            quantized = [_core.quantize_blocks(s, args.dtype, to, block) for s in shards]
            grid = _sync_request.pieces(route, shape, args.dtype, to, block)[1].shape
            members.append((i, "data", *request([q[0] for q in quantized], list(shape), "u8")))
            members.append((i, "scales", *request([q[1] for q in quantized], list(grid), "f32")))
            posts[i] = lambda outs: [None if c is None else (c, s) for c, s in zip(outs["data"], outs["scales"])]
        else:  # block_receiver
            members.append((i, "data", args, shards, finish))
            posts[i] = lambda outs, dtype=args.dtype, to=to, block=block: [
                None if o is None else _core.quantize_blocks(_np.ascontiguousarray(o), dtype, to, block)
                for o in outs["data"]]
        for piece in _sync_request.pieces(route, shape, args.dtype, to, block):
            held.append(_sync_request.held_bytes(piece, route, src_side, dst_side, shape, args.dtype, to, block))
    all_args = [m[2] for m in members]
    groups = _sync_request.conversion_classes([(a.dtype, a.to_dtype or a.dtype) for a in all_args])
    if memory_budget is not None and len(members) > 1:
        budget = _args.byte_count("memory_budget", memory_budget)
        groups = [[c[i] for i in g] for c in groups
                  for g in _core.budget_groups([all_args[i] for i in c], budget, [held[i] for i in c])]
    outs = [dict() for _ in tensors]
    left = _collections.Counter(m[0] for m in members)
    done = done_bytes = 0
    for g, group in enumerate(groups):
        moved = _core.run_host_batch([all_args[k] for k in group], [members[k][3] for k in group])
        for k, o in zip(group, moved):
            i, role, _, _, finish = members[k]
            outs[i][role] = finish(o)
            left[i] -= 1
            if left[i] == 0:
                done += 1
                done_bytes += sizes[i]
        if progress is not None:
            progress(SyncProgress(done, len(tensors), done_bytes, sum(sizes), g + 1, len(groups)))
    return [posts[i](o) if i in posts else o["data"] for i, o in enumerate(outs)]


def _global_bytes(args):
    from . import _core

    n = 1
    for v in ([] if isinstance(args.shape, list) else args.shape.split("x")):
        n *= int(v)
    return n * _core.dtype_size(args.dtype)
