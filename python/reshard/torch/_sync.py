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
- Buffers that stay: where every member's buffers of the move are ones later calls use again (the sources' local
  tensors, destinations given, the staging reshard keeps without a memory budget: _buffers_stay, voted on with the
  problems), the plans are for buffers that stay: one-sided steps read the sources and write the destinations in
  place, each allocation mapped by a peer once. Otherwise they are for changing buffers, as redistribute()'s (a
  source staged, or the member on NCCL, where mapping it would cost more).
- progress(SyncProgress) is called after each group has finished on this rank's GPU (the host waits for it).
- A target of another dtype than its source (a DTensor target's, or `dtype=`) converts in the move: the kernel that
  writes the target converts each element as tensor.to(dtype) does (reshard/dtype_convert.hpp). The target dtype must
  be known on every rank, since every rank plans every tensor: it comes from the target DTensor or from `dtype=`,
  never from a (mesh, placements, tensor) target's tensor, which only its own rank sees (that tensor's dtype must
  match). A batch converts one pair for all its members, so the set runs as one group per conversion pair (and one
  for the tensors that keep their dtype), each cut by the memory budget.
- Which side converts is _sync_request.conversion_route's rule: the senders where the target is narrower and each
  element sits on one source rank (the wire then carries the narrower bytes), the receivers' kernel otherwise.
- block_scales: fp8 targets quantized per block of the global tensor, one float32 scale per block
  (reshard/block_scale.hpp's rule), the scales delivered as a DTensor of their own under NAME + "_scale_inv", placed
  as the data on the target mesh. Every target rank must hold whole blocks (serving engines shard so); a source that
  holds each element once in whole blocks is quantized by the senders (codes and scales cross), any other by the
  receivers after the move. The routes' staging tensors count against memory_budget (_sync_request.held_bytes).
"""

import collections
import collections.abc
import itertools
import re

import torch
import torch.distributed as dist

from .. import _args, _core
from .. import _sync_request as rules
from . import _layout, _ops, _runtime, _sync_repeat

# (members, strategy, budget, every tensor's layouts) -> (PlanArgs list, pieces, groups, token). The token, a small
# int unique to the decision, keys what later calls reuse (_sync_run's executors and staging), so a lookup hashes an
# int, not every tensor's layouts.
_decided = {}
_DECIDED_KEPT = 64
_tokens = itertools.count()
_runtime.clear_hooks.append(_decided.clear)
_sides = {}  # (role, mesh, placements, tensor ndim, world) -> rules.Side (checked once, reused by later calls)
_runtime.clear_hooks.append(_sides.clear)
_runtime.clear_hooks.append(_sync_repeat.forget)
_agreements = collections.Counter()  # members -> syncs so far (fresh store keys per sync)

# Source dtype -> the target dtypes the move converts it to (reshard/dtype_convert.hpp: floating types).
_FLOATS = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
CONVERSIONS = {s: tuple(d for d in _FLOATS + _FP8 if d != s) for s in _FLOATS}
SCALE_SUFFIX = "_scale_inv"  # a block-scaled tensor's scales are returned under its name + this
dtype_name = _layout.dtype_name


class _Tensor:
    """One tensor of the request: its two sides in reshard's terms (rules.Side) and this rank's buffers."""

    __slots__ = ("name", "src", "dst", "shape", "dtype", "to_dtype", "source", "dest", "dest_dtensor", "target_mesh",
                 "target_placements", "block", "route", "scales_dest", "scales_dest_dtensor", "specs")

    def key(self):
        return (self.src, self.dst, self.shape, self.dtype, self.to_dtype, self.block)

    def scale_name(self):
        return self.name + SCALE_SUFFIX


def move_state_dict(sources, targets, *, dtype=None, block_scales=None, scales=None, strategy=None, memory_budget=None,
                    progress=None):
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
    float8_e4m3fn / float8_e5m2; a (mesh, placements, tensor) target's tensor must have that dtype.
    block_scales: block-scaled fp8 (DeepSeek-V3-style serving weights): an int b quantizes every 2-D fp8 target per
    b x b block of the global tensor, a mapping name -> b the tensors it names (each must have an fp8 target); the
    result then also holds NAME + "_scale_inv", a float32 DTensor of shape [ceil(M/b), ceil(N/b)] placed as the data,
    and the codes satisfy codes.float() * scale_inv ~ the source (docs/python.md states the rule). Every target rank must
    hold whole blocks. scales: name -> where to write those scales in place (a DTensor on the target's mesh and
    placements, or this rank's local float32 tensor; None on ranks outside the target mesh). strategy: as
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
    world = dist.get_world_size()
    tensors = _sync_repeat.reuse(sources, targets, dtype, block_scales, scales, world)
    if tensors is None:
        tensors = _request(sources, targets, dtype, block_scales, scales)
        _sync_repeat.remember(sources, targets, dtype, block_scales, scales, world, tensors)
    try:
        return _move(tensors, strategy, budget, progress)
    finally:
        _sync_repeat.release(tensors)


def _move(tensors, strategy, budget, progress):
    """The checked request's move on this rank (the rest of move_state_dict)."""
    me = dist.get_rank()
    members = rules.members(tensors[0].src, [t.dst for t in tensors]) if tensors else ()
    if me not in members:
        return {}
    from . import _sync_run

    device = torch.cuda.current_device()
    _agreements[members] += 1
    count, prefix = _agreements[members], f"{rules.PREFIX}/" + "-".join(map(str, members))
    own = _local_problem(tensors, me, device)
    problem, stay = rules.agree_votes(_runtime._default_store(), f"{prefix}/{count}", members, me, own,
                                      not own and _buffers_stay(tensors, me, budget),
                                      f"{prefix}/{count - 2}" if count > 2 else None)
    if problem:
        raise ValueError(problem)
    key = (members, strategy, budget, stay, tuple(t.key() for t in tensors))
    decided = _decided.get(key)
    if decided is None:
        decided = _decide(tensors, members, me, strategy, budget, stay) + (next(_tokens),)
        if len(_decided) >= _DECIDED_KEPT:
            _decided.clear()
            _sync_run.forget()
        _decided[key] = decided
    args, pieces, groups, token = decided
    return _sync_run.run(tensors, pieces, args, groups, members, me, device,
                         (token, device) if budget is None else None, progress)


def _buffers_stay(tensors, me, budget):
    """This rank's vote on the plans' buffers (every member's must be True for plans on buffers that stay): True when
    every buffer the move reads or writes here is one a later call uses again, so that the peers map each once and
    one-sided steps read the sources in place (an RL loop's weight sync: a trainer's parameters, updated in place,
    into an engine's own tensors); False where a call makes new ones (a target given as (mesh, placements), a scales
    destination not given, a source or destination that is not contiguous, staging freed after each group under a
    memory budget), whose plans then price mapping them as redistribute()'s do (PlanOptions buffers_change). Asked
    only of buffers _local_problem found sound."""
    if budget is not None:
        return False
    for t in tensors:
        if me in t.src.ranks and not t.source._local_tensor.is_contiguous():
            return False
        if rules.local_shape(t.dst, t.shape, me) is None:
            continue
        if t.dest is None or not t.dest.is_contiguous() or (t.block is not None and (
                t.scales_dest is None or not t.scales_dest.is_contiguous())):
            return False
    return True


def _decide(tensors, members, me, strategy, budget, stay):
    """What the batch moves: every piece's PlanArgs (the planner's refusals raised, naming the tensor: the same on every
    rank; `stay`: planned for buffers that stay), the pieces ((tensor index, rules.Piece) each) and the groups of
    pieces the conversion pairs and the memory budget cut the set into."""
    args, pieces, held = [], [], []
    for i, t in enumerate(tensors):
        dtype, is_complex = _layout.DTYPES[t.dtype]
        to = dtype_name(t.to_dtype)
        for piece in rules.pieces(t.route, t.shape, dtype, to, t.block):
            shape = piece.shape + ((2,) if is_complex else ())
            a = _runtime.plan_args(t.src.mesh_shape, t.src.placements, t.dst.placements, shape, piece.dtype, strategy,
                                   buffers_change=not stay)
            a.options = {**a.options, **_args.plan_options(memory_budget=budget)}
            if piece.to_dtype is not None:
                a.to_dtype = piece.to_dtype
            args.append(rules.between(a, t.src, t.dst, members))
            try:
                _core.make_plan(a, members.index(me))
            except ValueError as e:
                raise ValueError(rules.problem(t.name, str(e))) from None
            pieces.append((i, piece))
            held.append(rules.held_bytes(piece, t.route, t.src, t.dst, t.shape, dtype, to, t.block))
    classes = rules.conversion_classes([(a.dtype, a.to_dtype or a.dtype) for a in args])
    if budget is None:
        return args, pieces, classes
    groups = []
    for members_ in classes:
        try:
            groups += [[members_[k] for k in g]
                       for g in _core.budget_groups([args[k] for k in members_], budget, [held[k] for k in members_])]
        except ValueError as e:  # "tensor k needs ... bytes ...": the tensor by its name
            text = re.sub(r"^tensor (\d+) needs",
                          lambda m: f"tensor '{tensors[pieces[members_[int(m.group(1))]][0]].name}' needs", str(e))
            raise ValueError(f"{rules.PREFIX}: {text}") from None
    return args, pieces, groups


def _request(sources, targets, dtype, block_scales=None, scales=None):
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
    _check_names("block_scales", block_scales, sources, int)
    _check_names("scales", scales, sources, None)
    world = dist.get_world_size()
    out = []
    for name, x in sources.items():
        t = _Tensor()
        t.name, t.specs = name, {}  # specs: the results' DTensorSpecs by role, made once (_sync_run._wrap)
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
        _block_scaling(t, block_scales, scales, sources)
        out.append(t)
    return out


def _check_names(what, value, sources, kind):
    """`value` is None, a `kind` for every tensor (kind None: mapping only), or a mapping naming sources."""
    if value is None:
        return
    if isinstance(value, collections.abc.Mapping):
        unknown = [n for n in value if n not in sources]
        if unknown:
            raise ValueError(f"{rules.PREFIX}: {what} names '{unknown[0]}', which has no source")
    elif kind is None or not isinstance(value, kind) or isinstance(value, bool):
        wanted = "a mapping name -> destination" if kind is None else "an int or a mapping name -> int"
        raise TypeError(f"move_state_dict: {what} is {wanted}, got {type(value).__name__}")


def _block_scaling(t, block_scales, scales, sources):
    """t.block (None: no block scaling), t.route (which side converts) and the scales' destination (t.scales_dest,
    t.scales_dest_dtensor)."""
    from torch.distributed.tensor import DTensor

    name = t.name
    if isinstance(block_scales, collections.abc.Mapping):
        t.block = block_scales.get(name)
    else:  # one block size for every 2-D fp8 target
        t.block = block_scales if t.to_dtype in _FP8 and len(t.shape) == 2 else None
    t.route = rules.conversion_route(name, t.src, t.dst, t.shape, _layout.DTYPES[t.dtype][0], dtype_name(t.to_dtype),
                                     t.block)
    t.scales_dest = t.scales_dest_dtensor = None
    dest = scales.get(name) if scales is not None else None
    if t.block is None:
        if dest is not None:
            raise ValueError(rules.problem(name, "scales= gives a destination for its scales, but it is not "
                                                 "block-scaled"))
        return
    if t.scale_name() in sources:
        raise ValueError(rules.problem(name, f"its scales would be returned as '{t.scale_name()}', which is also a "
                                             "source's name"))
    if isinstance(dest, DTensor):
        grid = rules.scale_grid_shape(t.shape, t.block)
        if (dest.device_mesh != t.target_mesh or tuple(dest.placements) != t.target_placements
                or tuple(dest.shape) != grid or dest.dtype != torch.float32):
            raise ValueError(rules.problem(name, f"the scales' DTensor must be float32 of shape {list(grid)} on the "
                                                 f"target's mesh and placements; got {dest.dtype} of shape "
                                                 f"{list(dest.shape)} with placements {tuple(dest.placements)}"))
        t.scales_dest_dtensor = dest
        t.scales_dest = dest._local_tensor
    else:
        t.scales_dest = dest  # this rank's alone: checked with it (_local_problem)


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
    # Kept only for PyTorch's own mesh and placement types (whose equality and hashing are PyTorch's).
    key = None
    if type(mesh) is DeviceMesh and all(type(p).__module__.startswith("torch.distributed.tensor") for p in placements):
        key = (role, mesh, tuple(placements), ndim, world)
        side = _sides.get(key)
        if side is not None:
            return side
    shape, ranks, _ = _ops.mesh_info(mesh)
    rules.check_ranks(name, role, ranks, world)
    try:
        text = _args.placements_text(placements)
    except ValueError as e:
        raise ValueError(rules.problem(name, f"{role} placements: {e}")) from None
    side = rules.Side(tuple(shape), tuple(ranks), rules.canonical_placements(name, role, text, ndim))
    if key is not None:
        if len(_sides) >= 1024:
            _sides.clear()
        _sides[key] = side
    return side


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
    for t in tensors:
        if t.scales_dest is None:
            continue
        want = rules.local_shape(t.dst, rules.scale_grid_shape(t.shape, t.block), me)
        d = t.scales_dest
        if want is None:
            return rules.problem(t.name, f"rank {me} is outside the target mesh but was given a destination for scales")
        if not isinstance(d, torch.Tensor) or type(d).__name__ == "DTensor":
            return rules.problem(t.name, f"rank {me}'s scales destination is a {type(d).__name__}, not a local "
                                         "torch.Tensor")
        text = rules.buffer_problem(t.name, me, "scales destination", d.shape, want, str(d.device), here, d.dtype,
                                    torch.float32)
        if text:
            return text
    return ""
