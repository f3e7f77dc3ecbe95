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


@functools.lru_cache(maxsize=65536)
def local_shape(side, shape, rank):
    """`rank`'s local shape of `shape` placed on `side` (None outside the mesh), as reshard.layout computes it
    (_StridedShard too)."""
    if rank not in side.ranks:
        return None
    text = _core.layout_json("x".join(map(str, side.mesh_shape)), None, ",".join(side.placements),
                             "x".join(map(str, shape)) if shape else [])
    return tuple(json.loads(text)["ranks"][side.ranks.index(rank)]["local_shape"])


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


def agree(store, key, members_, me, own):
    """The first member's problem in rank order ("" when none), the same on every member: each member sets its own
    under `key`/rank (a fresh key per sync) and reads the others' (store: set(key, str), get(key) -> bytes, blocking
    until the key is set)."""
    store.set(f"{key}/{me}", own)
    for r in members_:
        text = own if r == me else bytes(store.get(f"{key}/{r}")).decode()
        if text:
            return text
    return ""
