"""reshard.torch.move_state_dict: a set of DTensors moved from one mesh to another mesh of the same world (weight sync:
training ranks -> serving ranks), many tensors in one batch call, into new DTensors or into destinations the receiver
already owns.

The rules this module follows:
- Every rank of the world calls it with the same names, source layouts and target layouts (as for any DTensor
  program). The request is checked on every rank before anything moves: a bad request raises ValueError on every
  rank, one line naming the tensor and the problem. Ranks in neither mesh then return {} at once.
- The ranks of both meshes (the "members": the sorted union of their ranks) run one batch on reshard's communicator of
  the members (position i of the sorted union is rank i of the batch's world); the plans are cross-mesh plans
  (planner/src/cross_mesh.hpp: ranks only in the source send, ranks only in the target receive).
- What only one rank can see (its source local tensor, its destination tensor) is checked there; the members agree on
  the first problem through the default store before anything moves, so it too is raised on every member.
- memory_budget (bytes per rank, default reshard.torch.configure's) holds for the whole set: the tensors run in
  consecutive groups whose batch fits it (reshard.budget_groups' rule, from global plans: every rank decides the same
  groups); each group's executor is prepared, run and freed before the next, so at most one group's workspace is
  held. Without a budget the whole set is one batch, prepared once and reused by later calls with the same layouts.
- progress(SyncProgress) is called after each group has finished on this rank's GPU (the host waits for it).
"""

import collections
import collections.abc
import functools
import json
import re

import torch
import torch.distributed as dist

from .. import _args, _core
from . import _layout, _ops, _runtime

_decided = {}  # (members, strategy, budget, every tensor's layouts) -> (PlanArgs list, groups)
_DECIDED_KEPT = 64
_runtime.clear_hooks.append(_decided.clear)
_agreements = collections.Counter()  # members -> calls so far (fresh store keys per call)

# Source dtype -> the target dtypes the move converts it to (none: the move keeps the dtype).
CONVERSIONS = {}


class _Tensor:
    """One tensor of the request: its layouts in reshard's terms and this rank's buffers."""

    __slots__ = ("name", "src_ranks", "src_shape", "src", "dst_ranks", "dst_shape", "dst", "shape", "dtype", "source",
                 "dest", "dest_dtensor", "target_mesh", "target_placements")

    def key(self):
        return (self.src_ranks, self.src_shape, self.src, self.dst_ranks, self.dst_shape, self.dst, self.shape,
                self.dtype)


def move_state_dict(sources, targets, *, strategy=None, memory_budget=None, progress=None):
    """Moves every DTensor of `sources` (name -> DTensor, all on one mesh) to its target, on another mesh of the same
    world (other ranks, overlapping ranks, or the same ranks in another shape), in one batch call.

    targets: name -> one of
      - (DeviceMesh, placements): a new DTensor on that mesh is made;
      - a DTensor: written in place (its local tensor), on its mesh and placements;
      - (DeviceMesh, placements, tensor): written into `tensor`, this rank's local part (None on ranks outside that
        mesh); the result wraps it.
    Every rank of the world calls it with the same names and layouts (a rank outside the source mesh passes the
    DTensors PyTorch gives it there: empty local tensors with the global spec). Returns name -> DTensor on the target
    mesh on the ranks of the target mesh, {} on the others (ranks in neither mesh return at once). strategy: as
    redistribute()'s; memory_budget: bytes per rank for the whole set (int or "64MiB"; default: configure()'s);
    progress: called with a reshard.SyncProgress after each group of tensors has finished on this rank.
    Bad requests (a rank outside the world, mismatched global shapes, a destination of the wrong shape or dtype, an
    unsupported dtype pair) raise ValueError naming the tensor, on every rank.
    """
    reason = _runtime.cuda_unavailable_reason()
    if reason:
        raise RuntimeError(f"move_state_dict needs reshard's CUDA backend and torch.distributed: {reason}")
    strategy = strategy or _runtime.settings.strategy
    budget = _args.byte_count("memory_budget", memory_budget if memory_budget is not None else
                              _runtime.settings.memory_budget)
    tensors = _request(sources, targets)
    me = dist.get_rank()
    members = tuple(sorted(set(tensors[0].src_ranks).union(*(t.dst_ranks for t in tensors)))) if tensors else ()
    if me not in members:
        return {}
    key = (members, strategy, budget, tuple(t.key() for t in tensors))
    decided = _decided.get(key)
    if decided is None:
        decided = _decide(tensors, members, me, strategy, budget)
        if len(_decided) >= _DECIDED_KEPT:
            _decided.clear()
        _decided[key] = decided
    args, groups = decided
    device = torch.cuda.current_device()
    problem = _local_problem(tensors, me, device)
    problem = _agree(members, me, problem)
    if problem:
        raise ValueError(problem)
    from . import _sync_run

    return _sync_run.run(tensors, args, groups, members, me, device, key + (device,) if budget is None else None,
                         progress)


def _decide(tensors, members, me, strategy, budget):
    """Every tensor's PlanArgs (the planner's refusals raised, naming the tensor: the same on every rank) and the
    groups the memory budget cuts the set into."""
    position = {r: i for i, r in enumerate(members)}
    args = [_plan_args(t, position, strategy, budget) for t in tensors]
    for t, a in zip(tensors, args):
        try:
            _core.make_plan(a, position[me])
        except ValueError as e:
            raise ValueError(f"move_state_dict: tensor '{t.name}': {e}") from None
    if budget is None:
        return args, [list(range(len(tensors)))]
    try:
        return args, _core.budget_groups(args, budget)
    except ValueError as e:  # "tensor i needs ... bytes ...": the tensor by its name
        text = re.sub(r"^tensor (\d+) needs", lambda m: f"tensor '{tensors[int(m.group(1))].name}' needs", str(e))
        raise ValueError(f"move_state_dict: {text}") from None


def _request(sources, targets):
    """Every tensor of the request, checked the same way on every rank (ValueError naming the tensor)."""
    from torch.distributed.tensor import DTensor

    if not isinstance(sources, collections.abc.Mapping) or not isinstance(targets, collections.abc.Mapping):
        raise TypeError("move_state_dict takes two mappings: name -> source DTensor, name -> target")
    missing = [n for n in sources if n not in targets]
    extra = [n for n in targets if n not in sources]
    if missing or extra:
        what = f"no target for '{missing[0]}'" if missing else f"a target for '{extra[0]}', which has no source"
        raise ValueError(f"move_state_dict: {what} (sources and targets must name the same tensors)")
    world = dist.get_world_size()
    out = []
    for name, x in sources.items():
        t = _Tensor()
        t.name = name
        if not isinstance(x, DTensor):
            raise ValueError(f"move_state_dict: tensor '{name}': the source is a {type(x).__name__}, not a DTensor")
        t.source = x
        t.shape = tuple(int(s) for s in x.shape)
        t.dtype = x.dtype
        if t.dtype not in _layout.DTYPES:
            raise ValueError(f"move_state_dict: tensor '{name}': dtype {t.dtype} is not one reshard moves")
        t.src_shape, t.src_ranks = _mesh_of(name, "source", x.device_mesh, world)
        t.src = _placements(name, "source", x.placements, len(t.shape))
        if out and (t.src_ranks, t.src_shape) != (out[0].src_ranks, out[0].src_shape):
            raise ValueError(f"move_state_dict: tensor '{name}': its source mesh {_mesh_str(t)} is not tensor "
                             f"'{out[0].name}''s {_mesh_str(out[0])} (one source mesh per call)")
        _target(t, targets[name], world)
        out.append(t)
    return out


def _target(t, target, world):
    """The target's mesh, placements, dtype and destination (t.dest: this rank's local destination or None)."""
    from torch.distributed.tensor import DTensor

    name = t.name
    t.dest = t.dest_dtensor = None
    if isinstance(target, DTensor):
        mesh, placements, shape, dtype = target.device_mesh, target.placements, tuple(target.shape), target.dtype
        t.dest_dtensor = target
        t.dest = target._local_tensor
    elif isinstance(target, (tuple, list)) and len(target) in (2, 3):
        mesh, placements = target[0], target[1]
        shape, dtype = t.shape, t.dtype
        if len(target) == 3 and target[2] is not None:
            # This rank's alone: its type, dtype, shape and device are checked with it (_local_problem), and the
            # members agree on the first problem.
            t.dest = target[2]
    else:
        raise ValueError(f"move_state_dict: tensor '{name}': a target is (DeviceMesh, placements), a DTensor, or "
                         f"(DeviceMesh, placements, tensor); got {type(target).__name__}")
    t.dst_shape, t.dst_ranks = _mesh_of(name, "target", mesh, world)
    t.target_mesh = mesh
    t.target_placements = tuple(_layout.to_torch_placements(placements, len(t.shape))) if isinstance(
        placements, str) or any(isinstance(p, str) for p in placements) else tuple(placements)
    t.dst = _placements(name, "target", t.target_placements, len(t.shape))
    if shape != t.shape:
        raise ValueError(f"move_state_dict: tensor '{name}': global shape {list(t.shape)} on the source, "
                         f"{list(shape)} on the target")
    if dtype != t.dtype and dtype not in CONVERSIONS.get(t.dtype, ()):
        raise ValueError(f"move_state_dict: tensor '{name}': {t.dtype} -> {dtype} is not supported (the move keeps "
                         "the dtype)")


def _mesh_of(name, side, mesh, world):
    from torch.distributed.device_mesh import DeviceMesh

    if not isinstance(mesh, DeviceMesh):
        raise ValueError(f"move_state_dict: tensor '{name}': the {side} mesh is a {type(mesh).__name__}, not a "
                         "DeviceMesh")
    shape, ranks, _ = _ops.mesh_info(mesh)
    for r in ranks:
        if not 0 <= r < world:
            raise ValueError(f"move_state_dict: tensor '{name}': {side} rank {r} is outside the world of {world} ranks")
    return tuple(shape), tuple(ranks)


def _placements(name, side, placements, ndim):
    try:
        return tuple(_core.normalize_placements(_args.placements_text(placements), ndim))
    except ValueError as e:
        raise ValueError(f"move_state_dict: tensor '{name}': {side} placements: {e}") from None


def _mesh_str(t):
    return "x".join(map(str, t.src_shape)) + str(list(t.src_ranks))


def _plan_args(t, position, strategy, budget):
    """The tensor's PlanArgs in the members' world (rank i: the i-th member)."""
    dtype_name, is_complex = _layout.DTYPES[t.dtype]
    shape = t.shape + ((2,) if is_complex else ())
    a = _runtime.plan_args(t.src_shape, t.src, t.dst, shape, dtype_name, strategy)
    a.ranks = [position[r] for r in t.src_ranks]
    a.dst_mesh = "x".join(map(str, t.dst_shape))
    a.dst_ranks = [position[r] for r in t.dst_ranks]
    a.world_size = len(position)
    a.memory_budget = budget
    return a


@functools.lru_cache(maxsize=65536)
def local_shape(mesh_shape, ranks, placements, shape, rank):
    """This rank's local shape of a layout (None outside the mesh), as reshard.layout computes it (_StridedShard
    too). Arguments are tuples (cached: a repeated sync asks again for every tensor)."""
    if rank not in ranks:
        return None
    # The layout by row-major mesh position (which world ranks sit there does not change a rank's part).
    text = _core.layout_json("x".join(map(str, mesh_shape)), None, ",".join(placements),
                             "x".join(map(str, shape)) if shape else [])
    return tuple(json.loads(text)["ranks"][ranks.index(rank)]["local_shape"])


def _local_problem(tensors, me, device):
    """The first problem with this rank's own buffers (its source local tensors, its destinations), or ""."""
    for t in tensors:
        want = local_shape(t.src_shape, t.src_ranks, t.src, t.shape, me)
        if want is not None:
            local = t.source._local_tensor
            if local.device.type != "cuda" or local.get_device() != device:
                return (f"move_state_dict: tensor '{t.name}': rank {me}'s source is on {local.device}, not on its GPU "
                        f"cuda:{device}")
            if tuple(local.shape) != want:
                return (f"move_state_dict: tensor '{t.name}': rank {me}'s source local tensor has shape "
                        f"{list(local.shape)}; the layout gives {list(want)}")
        want = local_shape(t.dst_shape, t.dst_ranks, t.dst, t.shape, me)
        if want is None:
            continue
        if t.dest is None:
            continue
        d = t.dest
        if not isinstance(d, torch.Tensor) or type(d).__name__ == "DTensor":
            return (f"move_state_dict: tensor '{t.name}': rank {me}'s destination is a {type(d).__name__}, not a local "
                    "torch.Tensor")
        if tuple(d.shape) != want or d.device.type != "cuda" or d.get_device() != device:
            return (f"move_state_dict: tensor '{t.name}': rank {me}'s destination has shape {list(d.shape)} on "
                    f"{d.device}; the target layout gives shape {list(want)} on cuda:{device}")
        if d.dtype != t.dtype:
            return (f"move_state_dict: tensor '{t.name}': rank {me}'s destination is {d.dtype}; the source is "
                    f"{t.dtype} (the move keeps the dtype)")
    return ""


def _agree(members, me, problem):
    """The first members' problem (in rank order), the same on every member: each publishes its own under a fresh key
    of the default store and reads every other's."""
    _agreements[members] += 1
    prefix = "move_state_dict/" + "-".join(map(str, members)) + f"/{_agreements[members]}/"
    store = _runtime._default_store()
    store.set(prefix + str(me), problem)
    for r in members:
        text = problem if r == me else bytes(store.get(prefix + str(r))).decode()
        if text:
            return text
    return ""
