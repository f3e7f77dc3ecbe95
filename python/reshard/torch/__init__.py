"""reshard for PyTorch DTensors.

    import reshard.torch as rt
    y = rt.redistribute(x, mesh, [Shard(1)])      # as x.redistribute(mesh, [Shard(1)]), differentiable
    rt.enable()                                    # every DTensor redistribution of the process through reshard
    with rt.enabled(): ...                         # the same for a block
    ys = rt.redistribute_many([w1, w2], [[Shard(1)], [Replicate()]])   # many tensors of one mesh in one call
    out = rt.move_state_dict(model_sd, {n: (serve_mesh, [Shard(0)]) for n in model_sd})  # to another mesh (weights)
    rt.stats()                                     # how many went where, and why some stayed with PyTorch

Needs torch with torch.distributed initialized (NCCL, one GPU per process, as torchrun starts it) and reshard built
with its CUDA backend; anything else is left to PyTorch and counted. docs/python.md has the details.
"""

import os

try:
    import torch  # first: the process then has PyTorch's NCCL when reshard._cuda loads
except ModuleNotFoundError as _missing:
    if _missing.name != "torch":
        raise
    raise ImportError(
        "reshard.torch needs PyTorch (a CUDA build, with torch.distributed): pip install torch; "
        "reshard itself works without it"
    ) from None
from torch.distributed.tensor import Shard

from .. import _args
from . import _autograd, _dtensor, _layout, _many, _ops, _patch, _runtime
from ._autograd import Redistribute
from ._many import redistribute_many
from ._sync import move_state_dict
from ._ops import redistribute_op

__all__ = ["redistribute", "redistribute_many", "move_state_dict", "enable", "disable", "enabled", "is_enabled",
           "stats", "reset_stats", "clear_cache", "configure", "redistribute_op"]

enable = _patch.enable
disable = _patch.disable
enabled = _patch.enabled
is_enabled = _patch.is_enabled
stats = _runtime.stats
reset_stats = _runtime.reset_stats
clear_cache = _runtime.clear_cache


def redistribute(dtensor, device_mesh=None, placements=None, *, async_op=False, forward_dtype=None,
                 backward_dtype=None, strategy=None, **kwargs):
    """DTensor.redistribute through reshard: the same result (bitwise), placements, DTensorSpec and autograd.

    placements: PyTorch placement objects, or reshard's text ("S0,R", ["S1", "R"]). strategy: auto (default: the
    configured one), collective, p2p or hybrid. Inside torch.compile this traces as DTensor.redistribute, which
    goes through reshard when enable() is on. Other keywords of DTensor.redistribute (such as a shard order) are
    passed to PyTorch, which then does the redistribution (counted in stats()).
    """
    if forward_dtype is None and not kwargs and not torch.compiler.is_compiling() and not dtensor.requires_grad:
        # A repeat of an eager call that needs no gradient: one lookup, the prepared executor's run, the DTensor.
        try:
            hot_key = (dtensor._spec, device_mesh, placements if isinstance(placements, str) else tuple(placements),
                       strategy or _runtime.settings.strategy)
            hot = _hot.get(hot_key)
        except TypeError:  # unhashable placements or spec: no repeat path
            hot_key = hot = None
        if hot is not None:
            out = _run_hot(hot, dtensor)
            if out is not None:
                return out
        out = _redistribute(dtensor, device_mesh, placements, async_op, forward_dtype, backward_dtype, strategy, kwargs)
        if hot_key is not None:
            _remember(hot_key, dtensor, out)
        return out
    return _redistribute(dtensor, device_mesh, placements, async_op, forward_dtype, backward_dtype, strategy, kwargs)


def _redistribute(dtensor, device_mesh, placements, async_op, forward_dtype, backward_dtype, strategy, kwargs):
    if torch.compiler.is_compiling() or kwargs:
        if kwargs and not torch.compiler.is_compiling():
            _runtime.count("pytorch", "DTensor.redistribute keywords " + ",".join(sorted(kwargs)))
        return _patch.original_method()(dtensor, device_mesh, placements, async_op=async_op,
                                        forward_dtype=forward_dtype, backward_dtype=backward_dtype, **kwargs)
    device_mesh = device_mesh or dtensor.device_mesh
    if placements is None:
        raise RuntimeError("placements is needed for redistribute!")
    placements = _target_placements(placements, dtensor.placements, dtensor.ndim)
    if not dtensor.requires_grad and forward_dtype is None:
        # Nothing to differentiate: what Redistribute.forward does, without autograd.Function's call overhead.
        return _autograd.redistribute_forward(dtensor, device_mesh, placements, strategy, async_op)
    return Redistribute.apply(dtensor, device_mesh, placements, async_op, forward_dtype, backward_dtype, strategy)


def _redistribute_method(self, device_mesh=None, placements=None, *, async_op=False, forward_dtype=None,
                         backward_dtype=None, **kwargs):
    """DTensor.redistribute while enable() is on: an eager call is redistribute()'s (the same result, spec and autograd,
    without PyTorch's layers before the local redistribution); keywords reshard does not know and calls under tracing
    (torch.compile, make_fx) take PyTorch's method, which routes the local redistribution through reshard too."""
    if kwargs or torch.compiler.is_compiling() or _ops.tracing():
        return _patch.original_method()(self, device_mesh, placements, async_op=async_op, forward_dtype=forward_dtype,
                                        backward_dtype=backward_dtype, **kwargs)
    return redistribute(self, device_mesh, placements, async_op=async_op, forward_dtype=forward_dtype,
                        backward_dtype=backward_dtype)


_patch.set_method(_redistribute_method)

_hot = {}  # (source spec, mesh as given, placements as given, strategy) -> (target spec, prepared Entry or None)
_HOT_KEPT = 4096


def _run_hot(hot, dtensor):
    """The result of a remembered call (None when its executor was evicted or the call is being traced)."""
    spec, entry = hot
    if _ops.tracing():
        return None
    local = dtensor._local_tensor
    if entry is None:  # nothing moves: the local tensor itself, as PyTorch
        _runtime.count("noop")
    else:
        local = _runtime.run_entry(entry, local)
        if local is None:
            return None
    return _dtensor.make(local, spec, False)


def _remember(key, dtensor, out):
    """Keeps what a repeat of an eager no-gradient call needs, where reshard moved it (or nothing moved)."""
    spec = out._spec
    if spec is dtensor._spec or spec.placements == dtensor._spec.placements:
        entry = None
    else:
        route = _ops.cached_route(dtensor._spec, spec, key[3], dtensor._local_tensor.dtype)
        if route is None or route[0] == "pytorch":
            return  # left to PyTorch: every call goes the whole way (and is counted)
        entry = _ops.route_entry(route)
        if route[0] == "reshard" and entry is None:
            return
    if len(_hot) >= _HOT_KEPT:
        _hot.clear()
    _hot[key] = (spec, entry)


def _profile_path(value):
    """configure()'s profile: a path (str or os.PathLike), or "" for the built-in profile (None in the settings)."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise ValueError("profile must be a path (str or os.PathLike) or \"\" for the built-in profile")
    return path or None


_targets = {}  # (placements as given, source placements, ndim) -> the target placements, normalised and checked
_TARGETS_KEPT = 4096


def _target_placements(placements, source, ndim):
    """DTensor.redistribute's checks and normalisation of the target placements, once per distinct request."""
    try:
        key = (placements if isinstance(placements, str) else tuple(placements), source, ndim)
        cached = _targets.get(key)
    except TypeError:  # an unhashable item: check it every time
        key = cached = None
    if cached is not None:
        return cached
    out = _layout.to_torch_placements(placements, ndim)
    for i, placement in enumerate(out):
        if placement.is_partial() and source[i] != placement:
            raise RuntimeError(
                f"Can not redistribute from {source[i]} to {placement}, "
                "redistributing to Partial is for internal use only!"
            )
        elif isinstance(placement, Shard) and placement.dim < 0:  # normalise the shard dim, keeping the class
            if type(placement) is Shard:
                out[i] = Shard(placement.dim + ndim)
            else:  # _StridedShard
                out[i] = type(placement)(placement.dim + ndim, split_factor=placement.split_factor)
    out = tuple(out)
    if key is not None:
        if len(_targets) >= _TARGETS_KEPT:
            _targets.clear()
        _targets[key] = out
    return out


def _count(name, value, hi):
    """A configure() count: int(value) from 1 to hi, else ValueError (one line)."""
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    return _args.integer(name, v, 1, hi)


def configure(*, strategy=None, transport=None, memory_budget=None, ranks_per_node=None, timeout_s=None,
              cache_size=None, fuse=None, low_sm=None, profile=None, relay=None):
    """Settings of reshard.torch (the same on every rank). strategy/transport/fuse/low_sm/relay: as `reshard plan`'s
    --strategy, --transport, --fuse, --low-sm and --relay (low_sm: when redistributions run beside compute);
    memory_budget: workspace bytes per rank (int or "64MiB"); ranks_per_node: for the cost model (1 to 2^16; default:
    LOCAL_WORLD_SIZE); timeout_s: NCCL calls and waits longer than this abort reshard's communicators (0.001 to 1e6
    s); cache_size: prepared executors kept (1 to 2^20); profile: path of a cost-model profile JSON (as `reshard plan
    --profile`, e.g. from `reshard calibrate`; the same file on every rank), read and checked here (ValueError naming
    the problem), "" for the built-in profile. A value out of range or of the wrong kind raises ValueError (TypeError
    for a bool timeout) and changes nothing. Returns the settings in force."""
    given = {"strategy": (strategy, str), "transport": (transport, str), "fuse": (fuse, str), "relay": (relay, str),
             "low_sm": (low_sm, bool),
             "memory_budget": (memory_budget, None),
             "ranks_per_node": (ranks_per_node, lambda v: _count("ranks_per_node", v, 1 << 16)),
             "timeout_s": (timeout_s, lambda v: _args.seconds("timeout_s", v)),
             "cache_size": (cache_size, lambda v: _count("cache_size", v, 1 << 20)),
             "profile": (profile, _profile_path)}
    s = _runtime.settings
    before = {name: getattr(s, name) for name in given}
    # Every value converted before any is set: a value that cannot be converted leaves the settings as they were.
    values = {name: convert(value) if convert else value
              for name, (value, convert) in given.items() if value is not None}
    for name, value in values.items():
        setattr(s, name, value)
    if profile is not None and s.profile is not None:
        try:  # the profile is read and checked now, not at the first redistribution
            _runtime.check_plannable((1,), ("R",), ("R",), (1,), "f32", "auto")
        except ValueError:
            for name, value in before.items():
                setattr(s, name, value)
            raise
    _ops._decisions.clear()  # plans depend on the settings: decide and prepare again
    _ops._routes.clear()
    _hot.clear()
    _runtime.clear_cache()
    return {name: getattr(s, name) for name in given}
