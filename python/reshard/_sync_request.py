"""The framework-free rules of a weight sync between meshes (reshard.torch.move_state_dict builds on them; the CPU
suite checks them without PyTorch): what a request must satisfy, the messages that say what it breaks, the world its
plans run in, and how the ranks agree on a problem only one of them can see.

- Every message is one line: "move_state_dict: tensor 'NAME': PROBLEM".
- The members of a sync are the sorted union of the source and target meshes' ranks; member i is rank i of the plans'
  world (its communicator), so ranks in neither mesh take no part.
- A rank's local shape in a layout depends on its row-major position in the mesh, not on which world rank sits there.
"""

import collections
import functools
import json
import math
import re

from . import _core

PREFIX = "move_state_dict"

# One side of a tensor's move: the mesh shape, the world ranks at its row-major positions, canonical placement text.
Side = collections.namedtuple("Side", "mesh_shape ranks placements")


def problem(name, text):
    return f"{PREFIX}: tensor '{name}': {text}"


def check_ranks(name, role, ranks, world):
    """ValueError when a rank of a mesh lies outside the world."""
    for r in ranks:
        if not 0 <= r < world:
            raise ValueError(problem(name, f"{role} rank {r} is outside the world of {world} ranks"))


def check_pair(name, src_shape, dst_shape, src_dtype, dst_dtype, conversions):
    """ValueError when the two sides' global shapes differ, or the move does not convert src_dtype to dst_dtype
    (conversions: source dtype -> the target dtypes the move converts it to)."""
    if tuple(src_shape) != tuple(dst_shape):
        raise ValueError(problem(name, f"global shape {list(src_shape)} on the source, {list(dst_shape)} on the "
                                       "target"))
    if dst_dtype != src_dtype and dst_dtype not in conversions.get(src_dtype, ()):
        raise ValueError(problem(name, f"{src_dtype} -> {dst_dtype} is not a conversion the move makes (floating "
                                       "sources to another floating type or fp8)"))


def check_source_mesh(name, side, first_name, first_side):
    """ValueError when a tensor's source mesh is not the first tensor's (one source mesh per sync)."""
    if (side.mesh_shape, side.ranks) != (first_side.mesh_shape, first_side.ranks):
        raise ValueError(problem(name, f"its source mesh {mesh_text(side)} is not tensor '{first_name}''s "
                                       f"{mesh_text(first_side)} (one source mesh per call)"))


def canonical_placements(name, role, text, ndim):
    """The canonical placement text of one side (ValueError naming the tensor for text reshard does not take)."""
    try:
        return tuple(_core.normalize_placements(text, ndim))
    except ValueError as e:
        raise ValueError(problem(name, f"{role} placements: {e}")) from None


def mesh_text(side):
    return "x".join(map(str, side.mesh_shape)) + str(list(side.ranks))


def members(src, dsts):
    """The sorted union of the source mesh's ranks and every target mesh's."""
    return tuple(sorted(set(src.ranks).union(*(d.ranks for d in dsts))))


def between(args, src, dst, members_):
    """PlanArgs `args` (the source's mesh and placements already set) placed between the two meshes in the members'
    world: member i is rank i."""
    position = {r: i for i, r in enumerate(members_)}
    args.ranks = [position[r] for r in src.ranks]
    args.dst_mesh = "x".join(map(str, dst.mesh_shape))
    args.dst_ranks = [position[r] for r in dst.ranks]
    args.world_size = len(members_)
    return args


_PLAIN = re.compile(r"S\d+|R")  # a canonical Shard or Replicate placement


@functools.lru_cache(maxsize=4096)
def local_boxes(mesh_shape, placements, shape):
    """Every mesh position's (global offset, local shape) of `shape` placed on a mesh, as reshard.layout computes them
    (with plain Shard and Replicate placements each local tensor is that box of the global one)."""
    text = _core.layout_json("x".join(map(str, mesh_shape)), None, ",".join(placements),
                             "x".join(map(str, shape)) if shape else [])
    return tuple((tuple(r["global_offset"]), tuple(r["local_shape"])) for r in json.loads(text)["ranks"])


@functools.lru_cache(maxsize=4096)
def local_shapes(mesh_shape, placements, shape):
    """Every mesh position's local shape of `shape` placed on a mesh (_StridedShard too)."""
    return tuple(local for _, local in local_boxes(mesh_shape, placements, shape))


def stays_on_rank(src, dst, shape):
    """Whether no element crosses between ranks: every target rank is a source rank whose source box holds its target
    box (plain Shard and Replicate placements on both sides; a Partial or _StridedShard side is taken to move)."""
    if not all(_PLAIN.fullmatch(p) for p in src.placements + dst.placements):
        return False
    a = local_boxes(src.mesh_shape, src.placements, tuple(shape))
    b = local_boxes(dst.mesh_shape, dst.placements, tuple(shape))
    for i, r in enumerate(dst.ranks):
        if r not in src.ranks:
            return False
        (so, ss), (to, ts) = a[src.ranks.index(r)], b[i]
        if any(t < s or t + n > s + m for s, m, t, n in zip(so, ss, to, ts) if n > 0):
            return False
    return True


def local_shape(side, shape, rank):
    """`rank`'s local shape of `shape` placed on `side` (None outside the mesh)."""
    if rank not in side.ranks:
        return None
    return local_shapes(side.mesh_shape, side.placements, tuple(shape))[side.ranks.index(rank)]


def conversion_classes(keys):
    """The tensors (indices) of each batch a set runs as, given each tensor's (dtype, target dtype): a batch converts
    only when every member converts one same pair (plan_batch.hpp), so the tensors that keep their dtype form one
    class and those converting each pair another, in the order of each class's first tensor."""
    classes = {}
    for i, (dtype, to_dtype) in enumerate(keys):
        classes.setdefault(None if dtype == to_dtype else (dtype, to_dtype), []).append(i)
    return list(classes.values())


def buffer_problem(name, rank, role, shape, want_shape, device, want_device, dtype=None, want_dtype=None):
    """The problem with one of this rank's buffers ("" when none): its shape, device and (destinations) dtype."""
    if tuple(shape) != tuple(want_shape) or device != want_device:
        return problem(name, f"rank {rank}'s {role} has shape {list(shape)} on {device}; the layout gives shape "
                             f"{list(want_shape)} on {want_device}")
    if dtype != want_dtype:
        return problem(name, f"rank {rank}'s {role} is {dtype}; the target's dtype is {want_dtype}")
    return ""


def agree(store, key, members_, me, own, retire=None):
    """The first member's problem in rank order ("" when none), the same on every member (agree_votes without a
    vote)."""
    return agree_votes(store, key, members_, me, own, True, retire)[0]


def agree_votes(store, key, members_, me, own, vote, retire=None):
    """(the first member's problem in rank order, "" when none; whether every member voted True), the same on every
    member: each member sets its own under `key`/rank (a fresh key per sync) and reads every other's (store: set(key,
    str), get(key) -> bytes, blocking until the key is set). `retire`: the key of this member's sync two before,
    deleted where the store can (delete_key): a member reads every key of a sync before it sets its key of the next,
    so once this member has read every key of the last sync, every member has read its key of the one before."""
    mine = ("1" if vote else "0") + own
    store.set(f"{key}/{me}", mine)
    records = [mine if r == me else bytes(store.get(f"{key}/{r}")).decode() for r in members_]
    if retire is not None and hasattr(store, "delete_key"):
        try:
            store.delete_key(f"{retire}/{me}")
        except RuntimeError:  # a store that cannot delete keeps it
            pass
    return next((r[1:] for r in records if r[1:]), ""), all(r[:1] == "1" for r in records)


# Where a tensor's dtype changes in the move (conversion_route), and the parts of it the batch moves (pieces):
# - "keep": the dtype stays; one piece, the tensor.
# - "receiver": the plan converts, in the kernel that writes the target (every source, Partial ones reduced first).
# - "sender": a narrower target whose source holds each element once (no Partial, no Replicate dim: each element is
#   converted once) and some of whose elements cross between ranks: every source rank converts its local tensor into
#   a staging tensor of the target dtype and the plan moves target-dtype elements, so the wire carries the narrower
#   bytes. Where nothing crosses (every target box within its rank's own source box: stays_on_rank) the plan's local
#   copy converts instead, one pass over the data rather than a conversion and a copy.
# - "block_sender": block-scaled fp8 (reshard/block_scale.hpp) from a source that holds each element once in whole
#   blocks: every source rank quantizes its local tensor (codes and its blocks' scales) and the batch moves the codes
#   (as u8) and the scale grid (f32, placed as the data); the wire carries fp8 bytes.
# - "block_receiver": block-scaled fp8 from any other source: the batch moves source-dtype elements into a staging
#   tensor on each target rank, which then quantizes its blocks (the target always holds whole blocks).
FP8 = ("f8e4m3", "f8e5m2")
Piece = collections.namedtuple("Piece", "role dtype to_dtype shape")  # role: "data" or "scales"


def holds_each_element_once(side):
    """Whether every element sits on exactly one rank of `side`: every mesh dim of size > 1 shards ("S", "SS")."""
    return all(p.startswith("S") or size == 1 for p, size in zip(side.placements, side.mesh_shape))


@functools.lru_cache(maxsize=4096)
def block_misalignment(side, shape, block):
    """"" when `side` gives every rank whole blocks (and the scale grid placed as the data gives it exactly those);
    otherwise why not (reshard/block_scale.hpp's rule)."""
    return _core.block_misalignment("x".join(map(str, side.mesh_shape)), None, ",".join(side.placements),
                                    "x".join(map(str, shape)), block)


def scale_grid_shape(shape, block):
    return tuple(-(-s // block) for s in shape)


def conversion_route(name, src, dst, shape, dtype, to_dtype, block=None, say=problem):
    """The route (above) of one tensor: dtype and to_dtype are reshard dtype names, block the scale block (None: no
    block scaling). ValueError naming the tensor (say(name, text): the message) for block scaling that cannot be
    delivered."""
    if block is None:
        if dtype == to_dtype:
            return "keep"
        narrower = _core.dtype_size(to_dtype) < _core.dtype_size(dtype)
        crosses = not stays_on_rank(src, dst, shape)
        return "sender" if narrower and crosses and holds_each_element_once(src) else "receiver"
    if to_dtype not in FP8:
        raise ValueError(say(name, "block scales quantize into f8e4m3 (float8_e4m3fn) or f8e5m2 (float8_e5m2), not "
                                   f"{to_dtype}"))
    if len(shape) != 2:
        raise ValueError(say(name, f"block scales apply to 2-D tensors, not to shape {list(shape)}"))
    if not isinstance(block, int) or isinstance(block, bool) or not 1 <= block <= 4096:
        raise ValueError(say(name, f"the scale block is a whole number of elements from 1 to 4096, got {block!r}"))
    why = block_misalignment(dst, shape, block)
    if why:
        raise ValueError(say(name, f"the target does not hold whole {block}x{block} blocks ({why})"))
    if holds_each_element_once(src) and not block_misalignment(src, shape, block):
        return "block_sender"
    return "block_receiver"


def pieces(route, shape, dtype, to_dtype, block=None):
    """What the batch moves for a tensor on `route`: Pieces (role, dtype, to_dtype or None, global shape); fp8 moves
    as u8 (the same bytes)."""
    moved = "u8" if to_dtype in FP8 else to_dtype
    if route == "keep":
        return [Piece("data", dtype, None, tuple(shape))]
    if route == "receiver":
        return [Piece("data", dtype, to_dtype, tuple(shape))]
    if route == "sender":
        return [Piece("data", moved, None, tuple(shape))]
    if route == "block_sender":
        return [Piece("data", "u8", None, tuple(shape)), Piece("scales", "f32", None, scale_grid_shape(shape, block))]
    if route == "block_receiver":
        return [Piece("data", dtype, None, tuple(shape))]
    raise ValueError(f"unknown conversion route {route!r}")


def largest_local_elements(side, shape):
    """The most elements any rank of `side` holds of `shape`."""
    return max(math.prod(s) for s in local_shapes(side.mesh_shape, side.placements, tuple(shape)))


def held_bytes(piece, route, src, dst, shape, dtype, to_dtype, block=None):
    """Bytes per rank (the most any rank needs) that the route's staging holds while `piece` runs, besides the plan's
    workspace (counted against the memory budget with it: budget_groups' `held`): the senders' narrowed tensor
    ("sender"), their codes and scales ("block_sender": the codes with the data piece, the scales with both, as they
    are made together), the receivers' source-dtype tensor ("block_receiver")."""
    if route == "sender":
        return largest_local_elements(src, tuple(shape)) * _core.dtype_size(to_dtype)
    if route == "block_sender":
        scales = largest_local_elements(src, scale_grid_shape(shape, block)) * 4
        return scales + (largest_local_elements(src, tuple(shape)) if piece.role == "data" else 0)
    if route == "block_receiver":
        return largest_local_elements(dst, tuple(shape)) * _core.dtype_size(dtype)
    return 0
