"""reshard.torch.move_state_dict: a set of DTensors moved from one mesh to another mesh of the same world (weight sync:
training ranks -> serving ranks), many tensors in one batch call, into new DTensors or into destinations the receiver
already owns.

The rules this module follows (the framework-free ones, with their messages, are reshard/_sync_request.py's, which
the CPU suite checks):
- Every rank of the world calls it with the same names, source layouts and target layouts (as for any DTensor
  program). The request is checked on every rank before anything moves: a bad request raises ValueError on every
  rank, one line naming the tensor and the problem. Ranks in neither mesh then return {} at once.
- The ranks of both meshes (the "members": the sorted union of their ranks) run one batch on reshard's communicator of
  the members (position i of the sorted union is rank i of the batch's world); the plans are cross-mesh plans
  (planner/src/plan/cross_mesh_transfers.hpp: ranks only in the source send, ranks only in the target receive).
- What only one rank can see (its source local tensor, its destination tensor) is checked there; the members agree on
  the first problem through the default store before anything moves, so it too is raised on every member.
- memory_budget (bytes per rank, default reshard.torch.configure's) holds for the whole set: the tensors run in
  consecutive groups whose batch fits it (reshard.budget_groups' rule, from global plans: every rank decides the same
  groups); each group's executor is prepared, run and freed before the next, so at most one group's workspace is
  held. Without a budget the set is one batch per conversion pair, each prepared once and reused by later calls with
  the same layouts.
- progress(SyncProgress) is called after each group has finished on this rank's GPU (the host waits for it).
- A target of another dtype than its source (a DTensor target's, or `dtype=`) converts in the move: the kernel that
  writes the target converts each element as tensor.to(dtype) does (reshard/dtype_convert.hpp). The target dtype must
  be known on every rank, since every rank plans every tensor: it comes from the target DTensor or from `dtype=`,
  never from a (mesh, placements, tensor) target's tensor, which only its own rank sees (that tensor's dtype must
  match). A batch converts one pair for all its members, so the set runs as one group per conversion pair (and one
  for the tensors that keep their dtype), each cut by the memory budget.
"""

import collections
import collections.abc
import re

import torch
import torch.distributed as dist

from .. import _args, _core
from .. import _sync_request as rules
from . import _layout, _ops, _runtime

_decided = {}  # (members, strategy, budget, every tensor's layouts) -> (PlanArgs list, groups)
_DECIDED_KEPT = 64
_runtime.clear_hooks.append(_decided.clear)
_agreements = collections.Counter()  # members -> syncs so far (fresh store keys per sync)

# Source dtype -> the target dtypes the move converts it to (reshard/dtype_convert.hpp: floating types).
_FLOATS = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
CONVERSIONS = {s: tuple(d for d in _FLOATS + _FP8 if d != s) for s in _FLOATS}
# Target dtypes reshard writes that no source has (reshard's names).
_TARGET_NAMES = {torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2"}


class _Tensor:
    """One tensor of the request: its two sides in reshard's terms (rules.Side) and this rank's buffers."""

    __slots__ = ("name", "src", "dst", "shape", "dtype", "to_dtype", "source", "dest", "dest_dtensor", "target_mesh",
                 "target_placements")

    def key(self):
        return (self.src, self.dst, self.shape, self.dtype, self.to_dtype)


def move_state_dict(sources, targets, *, dtype=None, strategy=None, memory_budget=None, progress=None):
    """Moves every DTensor of `sources` (name -> DTensor, all on one mesh) to its target, on another mesh of the same
    world (other ranks, overlapping ranks, or the same ranks in another shape), in one batch call.

    targets: name -> one of
      - (DeviceMesh, placements): a new DTensor on that mesh is made;
      - a DTensor: written in place (its local tensor), on its mesh and placements;
      - (DeviceMesh, placements, tensor): written into `tensor`, this rank's local part (None on ranks outside that
        mesh); the result wraps it.
    Every rank of the world calls it with the same names and layouts (a rank outside the source mesh passes the
    DTensors PyTorch gives it there: empty local tensors with the global spec). Returns name -> DTensor on the target
    mesh on the ranks of the target mesh, {} on the others (ranks in neither mesh return at once).
    dtype: the target dtype of targets given as (DeviceMesh, placements[, tensor]), a torch.dtype for all or a mapping
    name -> torch.dtype (default: the source's); a DTensor target has its own. Where it differs from the source's the
    move converts, as tensor.to(dtype) would: floating sources (f64, f32, f16, bf16) to any other floating type or to
    float8_e4m3fn / float8_e5m2; a (mesh, placements, tensor) target's tensor must have that dtype. strategy: as
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
    tensors = _request(sources, targets, dtype)
    me = dist.get_rank()
    members = rules.members(tensors[0].src, [t.dst for t in tensors]) if tensors else ()
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
    _agreements[members] += 1
    key_text = f"{rules.PREFIX}/" + "-".join(map(str, members)) + f"/{_agreements[members]}"
    problem = rules.agree(_runtime._default_store(), key_text, members, me, _local_problem(tensors, me, device))
    if problem:
        raise ValueError(problem)
    from . import _sync_run

    return _sync_run.run(tensors, args, groups, members, me, device, key + (device,) if budget is None else None,
                         progress)


def _decide(tensors, members, me, strategy, budget):
    """Every tensor's PlanArgs (the planner's refusals raised, naming the tensor: the same on every rank) and the
    groups the memory budget cuts the set into."""
    args = []
    for t in tensors:
        dtype_name, is_complex = _layout.DTYPES[t.dtype]
        shape = t.shape + ((2,) if is_complex else ())
        a = _runtime.plan_args(t.src.mesh_shape, t.src.placements, t.dst.placements, shape, dtype_name, strategy)
        a.options = {**a.options, **_args.plan_options(memory_budget=budget)}
        if t.to_dtype != t.dtype:
            a.to_dtype = _TARGET_NAMES.get(t.to_dtype) or _layout.DTYPES[t.to_dtype][0]
        args.append(rules.between(a, t.src, t.dst, members))
        try:
            _core.make_plan(a, members.index(me))
        except ValueError as e:
            raise ValueError(rules.problem(t.name, str(e))) from None
    classes = rules.conversion_classes([(t.dtype, t.to_dtype) for t in tensors])
    if budget is None:
        return args, classes
    groups = []
    for members_ in classes:
        try:
            groups += [[members_[i] for i in g] for g in _core.budget_groups([args[i] for i in members_], budget)]
        except ValueError as e:  # "tensor i needs ... bytes ...": the tensor by its name
            text = re.sub(r"^tensor (\d+) needs",
                          lambda m: f"tensor '{tensors[members_[int(m.group(1))]].name}' needs", str(e))
            raise ValueError(f"{rules.PREFIX}: {text}") from None
    return args, groups


def _request(sources, targets, dtype):
    """Every tensor of the request, checked the same way on every rank (ValueError naming the tensor)."""
    from torch.distributed.tensor import DTensor

    if not isinstance(sources, collections.abc.Mapping) or not isinstance(targets, collections.abc.Mapping):
        raise TypeError("move_state_dict takes two mappings: name -> source DTensor, name -> target")
    missing = [n for n in sources if n not in targets]
    extra = [n for n in targets if n not in sources]
    if missing or extra:
        what = f"no target for '{missing[0]}'" if missing else f"a target for '{extra[0]}', which has no source"
        raise ValueError(f"{rules.PREFIX}: {what} (sources and targets must name the same tensors)")
    if isinstance(dtype, collections.abc.Mapping):
        unknown = [n for n in dtype if n not in sources]
        if unknown:
            raise ValueError(f"{rules.PREFIX}: dtype names '{unknown[0]}', which has no source")
    elif dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(f"move_state_dict: dtype is a torch.dtype or a mapping name -> torch.dtype, got "
                        f"{type(dtype).__name__}")
    world = dist.get_world_size()
    out = []
    for name, x in sources.items():
        t = _Tensor()
        t.name = name
        if not isinstance(x, DTensor):
            raise ValueError(rules.problem(name, f"the source is a {type(x).__name__}, not a DTensor"))
        t.source = x
        t.shape = tuple(int(s) for s in x.shape)
        t.dtype = x.dtype
        if t.dtype not in _layout.DTYPES:
            raise ValueError(rules.problem(name, f"dtype {t.dtype} is not one reshard moves"))
        t.src = _side(name, "source", x.device_mesh, x.placements, len(t.shape), world)
        if out:
            rules.check_source_mesh(name, t.src, out[0].name, out[0].src)
        _target(t, targets[name], world, dtype.get(name) if isinstance(dtype, collections.abc.Mapping) else dtype)
        out.append(t)
    return out


def _target(t, target, world, wanted):
    """The target's side, placements, dtype (`wanted`: dtype='s for this tensor) and destination (t.dest: this rank's
    local destination or None)."""
    from torch.distributed.tensor import DTensor

    name = t.name
    t.dest = t.dest_dtensor = None
    if isinstance(target, DTensor):
        mesh, placements, shape, dtype = target.device_mesh, target.placements, tuple(target.shape), target.dtype
        t.dest_dtensor = target
        t.dest = target._local_tensor
        if wanted is not None and wanted != dtype:
            raise ValueError(rules.problem(name, f"dtype= asks for {wanted}, but the target DTensor is {dtype}"))
    elif isinstance(target, (tuple, list)) and len(target) in (2, 3):
        mesh, placements = target[0], target[1]
        shape, dtype = t.shape, t.dtype if wanted is None else wanted
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"move_state_dict: tensor '{name}': dtype {dtype!r} is not a torch.dtype")
        if len(target) == 3 and target[2] is not None:
            # This rank's alone: its type, dtype, shape and device are checked with it (_local_problem), and the
            # members agree on the first problem.
            t.dest = target[2]
    else:
        raise ValueError(rules.problem(name, "a target is (DeviceMesh, placements), a DTensor, or (DeviceMesh, "
                                             f"placements, tensor); got {type(target).__name__}"))
    if isinstance(placements, str) or any(isinstance(p, str) for p in placements):
        placements = _layout.to_torch_placements(placements, len(t.shape))
    t.target_mesh = mesh
    t.target_placements = tuple(placements)
    t.dst = _side(name, "target", mesh, t.target_placements, len(t.shape), world)
    rules.check_pair(name, t.shape, shape, t.dtype, dtype, CONVERSIONS)
    t.to_dtype = dtype


def _side(name, role, mesh, placements, ndim, world):
    from torch.distributed.device_mesh import DeviceMesh

    if not isinstance(mesh, DeviceMesh):
        raise ValueError(rules.problem(name, f"the {role} mesh is a {type(mesh).__name__}, not a DeviceMesh"))
    shape, ranks, _ = _ops.mesh_info(mesh)
    rules.check_ranks(name, role, ranks, world)
    try:
        text = _args.placements_text(placements)
    except ValueError as e:
        raise ValueError(rules.problem(name, f"{role} placements: {e}")) from None
    return rules.Side(tuple(shape), tuple(ranks), rules.canonical_placements(name, role, text, ndim))


def _local_problem(tensors, me, device):
    """The first problem with this rank's own buffers (its source local tensors, its destinations), or ""."""
    here = f"cuda:{device}"
    for t in tensors:
        want = rules.local_shape(t.src, t.shape, me)
        if want is not None:
            local = t.source._local_tensor
            text = rules.buffer_problem(t.name, me, "source local tensor", local.shape, want, str(local.device), here)
            if text:
                return text
        want = rules.local_shape(t.dst, t.shape, me)
        if want is None or t.dest is None:
            continue
        d = t.dest
        if not isinstance(d, torch.Tensor) or type(d).__name__ == "DTensor":
            return rules.problem(t.name, f"rank {me}'s destination is a {type(d).__name__}, not a local torch.Tensor")
        text = rules.buffer_problem(t.name, me, "destination", d.shape, want, str(d.device), here, d.dtype,
                                    t.to_dtype)
        if text:
            return text
    return ""
