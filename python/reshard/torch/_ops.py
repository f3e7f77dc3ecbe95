"""Routing one local redistribution: reshard's executor (eager), the `reshard::redistribute` custom op (inside traced
graphs: torch.compile, make_fx), or PyTorch (anything reshard does not take, with the reason counted).

The custom op has a fake implementation (the target local shape, computed from the layout), so torch.compile keeps it
in the graph, and an autograd formula (the redistribution back, with PyTorch's backward rules), so it is
differentiable on its own too.
"""

import weakref
from typing import List

import torch
import torch.distributed as dist

from .. import _shapes
from .._shapes import backward_target
from . import _layout, _runtime
from ._layout import Unsupported

try:
    from torch.distributed._functional_collectives import _are_we_tracing
except ImportError:  # pragma: no cover - older PyTorch

    def _are_we_tracing():
        return torch.compiler.is_compiling()


_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", None)
_pre_dispatch_len = getattr(torch._ops, "_len_torch_dispatch_stack_pre_dispatch", None)


def tracing():
    """_are_we_tracing(), answered by two cheap calls where no dispatch mode is active (eager code): tracing
    (make_fx, AOT autograd, export) runs under a proxy or functional mode, torch.compile's frames under dynamo."""
    if (_stack_len is not None and _pre_dispatch_len is not None and _stack_len() == 0 and _pre_dispatch_len() == 0
            and not torch.compiler.is_compiling()):
        return False
    return _are_we_tracing()


try:
    from torch.utils._python_dispatch import _disable_current_modes
except ImportError:  # pragma: no cover
    import contextlib

    _disable_current_modes = contextlib.nullcontext


@torch.library.custom_op("reshard::redistribute", mutates_args=())
def redistribute_op(local: torch.Tensor, mesh_shape: List[int], mesh_ranks: List[int], src: str, dst: str,
                    global_shape: List[int], strategy: str) -> torch.Tensor:
    """This rank's local tensor of a DTensor of `global_shape` on the mesh (mesh_shape, its global ranks in row-major
    order), redistributed from `src` to `dst` (canonical placement text, "S0,R")."""
    return _runtime.run(local, tuple(mesh_shape), tuple(mesh_ranks), tuple(src.split(",")), tuple(dst.split(",")),
                        tuple(global_shape), strategy)


@redistribute_op.register_fake
def _redistribute_fake(local, mesh_shape, mesh_ranks, src, dst, global_shape, strategy):
    position = list(mesh_ranks).index(dist.get_rank())
    shape = _shapes.local_shape(global_shape, mesh_shape, dst.split(","), _shapes.mesh_coord(position, mesh_shape))
    return local.new_empty(shape)


def _setup_context(ctx, inputs, output):
    ctx.args = inputs[1:]


def _backward(ctx, grad):
    mesh_shape, mesh_ranks, src, dst, global_shape, strategy = ctx.args
    target = backward_target(dst.split(","), src.split(","))
    if _shapes.canonical(target, mesh_shape) == _shapes.canonical(tuple(dst.split(",")), mesh_shape):
        return grad, None, None, None, None, None, None
    out = torch.ops.reshard.redistribute(grad, mesh_shape, mesh_ranks, dst, ",".join(target), global_shape, strategy)
    return out, None, None, None, None, None, None


redistribute_op.register_autograd(_backward, setup_context=_setup_context)

_mesh_infos = {}  # id(DeviceMesh) -> (weak reference, (mesh shape, global ranks row-major, this rank's position))


def mesh_info(mesh):
    entry = _mesh_infos.get(id(mesh))
    if entry is not None and entry[0]() is mesh:
        return entry[1]
    with _disable_current_modes():  # the mesh's rank tensor is real, also while a graph is traced
        ranks_tensor = mesh.mesh
        shape = tuple(int(s) for s in ranks_tensor.shape)
        ranks = tuple(int(r) for r in ranks_tensor.flatten().tolist())
    me = dist.get_rank()
    info = (shape, ranks, ranks.index(me) if me in ranks else None)
    try:
        ref = weakref.ref(mesh)
    except TypeError:
        ref = lambda: mesh  # noqa: E731 - keeps the mesh alive; meshes live as long as the program anyway
    _mesh_infos[id(mesh)] = (ref, info)
    return info


_decisions = {}  # (mesh, src, dst, shape, dtype, strategy) -> None (reshard plans it) or the reason it does not


def _check_shard_order(spec):
    order = getattr(spec, "shard_order", None)
    is_default = getattr(type(spec), "is_default_device_order", None)
    if order is not None and is_default is not None and not is_default(order):
        raise Unsupported("non-default shard order")


_routes = {}  # (current spec, target spec, is_backward, strategy, dtype) -> route (eager calls: DTensorSpec is hashable)
_ROUTES_KEPT = 4096


def redistribute_local(local, current_spec, target_spec, *, is_backward=False, strategy=None):
    """This rank's local tensor redistributed from current_spec to target_spec by reshard (a new tensor), or `local`
    itself when nothing moves (as PyTorch returns it). Raises Unsupported(reason) for what reshard leaves to PyTorch;
    the decision depends only on what every rank of the mesh sees alike (mesh, placements, global shape, dtype)."""
    strategy = strategy or _runtime.settings.strategy
    traced = tracing()
    route = key = None
    if not traced:  # a repeat skips the analysis below
        key = (current_spec, target_spec, is_backward, strategy, local.dtype)
        try:
            route = _routes.get(key)
        except TypeError:  # an unhashable spec
            key = None
    if route is None:
        try:
            route = _route(local.dtype, current_spec, target_spec, is_backward, strategy)
        except Unsupported as e:
            route = ("pytorch", str(e))
        if key is not None:
            if len(_routes) >= _ROUTES_KEPT:
                _routes.clear()
            _routes[key] = route
    if route[0] == "pytorch":
        raise Unsupported(route[1])
    if local.device.type != "cuda":
        raise Unsupported(f"{local.device.type} tensors")
    if route[0] == "noop":
        _runtime.count("noop")
        return local
    _, mesh_shape, mesh_ranks, src, dst, shape, prepared = route
    if traced:
        _runtime.count("traced")
        return torch.ops.reshard.redistribute(local, list(mesh_shape), list(mesh_ranks), ",".join(src), ",".join(dst),
                                              list(shape), strategy)
    if prepared[0] is not None:  # a repeat: the route keeps its prepared executor
        out = _runtime.run_entry(prepared[0], local)
        if out is not None:
            return out
    if torch.cuda.is_current_stream_capturing() and not _runtime.is_prepared(
            mesh_shape, mesh_ranks, src, dst, shape, local.dtype, strategy, local.device.index):
        raise Unsupported("first use inside CUDA graph capture (run it once before capturing)")
    entry = prepared[0] = _runtime.prepare(local, mesh_shape, mesh_ranks, src, dst, shape, strategy)
    return _runtime.run_entry(entry, local)


def cached_route(current_spec, target_spec, strategy, dtype):
    """The route an eager forward call of redistribute_local took (None when it is not cached)."""
    try:
        return _routes.get((current_spec, target_spec, False, strategy, dtype))
    except TypeError:
        return None


def route_entry(route):
    """The prepared executor a route of redistribute_local keeps (after its first eager run), else None."""
    return route[6][0] if route[0] == "reshard" else None


def _route(dtype, current_spec, target_spec, is_backward, strategy):
    """("noop",), ("reshard", mesh shape, mesh ranks, src, dst, global shape, [prepared Entry or None]), or raises
    Unsupported(reason)."""
    reason = _runtime.cuda_unavailable_reason()
    if reason:
        raise Unsupported(reason)
    if current_spec.mesh != target_spec.mesh:
        raise Unsupported("source and target on different meshes")
    mesh_shape, mesh_ranks, position = mesh_info(current_spec.mesh)
    if position is None:
        raise Unsupported("this rank is not in the mesh")
    if dtype not in _layout.DTYPES:
        raise Unsupported(f"dtype {dtype}")
    _check_shard_order(current_spec)
    _check_shard_order(target_spec)
    meta = current_spec.tensor_meta
    if meta is None:
        raise Unsupported("spec without tensor metadata")
    shape = tuple(meta.shape)
    if not _layout.is_concrete(shape):
        raise Unsupported("symbolic (dynamic) shape")
    shape = tuple(int(s) for s in shape)
    src = _layout.placements_text(current_spec.placements, len(shape))
    dst = _layout.placements_text(target_spec.placements, len(shape))
    if is_backward:
        dst = list(backward_target(src, dst))
    src = _shapes.canonical(src, mesh_shape)
    dst = _shapes.canonical(dst, mesh_shape)
    if src == dst:
        return ("noop",)
    key = (mesh_shape, mesh_ranks, src, dst, shape, dtype, strategy)
    if key not in _decisions:
        _decisions[key] = _decide(mesh_shape, src, dst, shape, dtype, strategy)
    if _decisions[key] is not None:
        raise Unsupported(_decisions[key])
    return ("reshard", mesh_shape, mesh_ranks, src, dst, shape, [None])


def _decide(mesh_shape, src, dst, shape, dtype, strategy):
    """None when reshard takes the redistribution, else the reason it is left to PyTorch."""
    dtype_name, is_complex = _layout.DTYPES[dtype]
    exact = dtype.is_floating_point or dtype.is_complex
    avg_reduced = sum(1 for s, d, n in zip(src, dst, mesh_shape) if n > 1 and s == "P(avg)" and d != s)
    if avg_reduced > 1 and not exact:
        return "integer Partial(avg) reduced over several mesh dims (PyTorch truncates once per mesh dim)"
    for s, d in zip(src, dst):
        if s[0] == "P" and d[0] == "P" and s != d:
            return "Partial reduce op changes (PyTorch's own semantics kept)"
        if d == "P" and s[0] != "P" and not exact:
            return "integer Replicate/Shard -> Partial(sum) (PyTorch divides into floats)"
        if is_complex and (s in ("P(max)", "P(min)") or d in ("P(max)", "P(min)")):
            return "max/min of complex values"
    plan_shape = tuple(shape) + ((2,) if is_complex else ())
    try:
        _runtime.check_plannable(mesh_shape, src, dst, plan_shape, dtype_name, strategy)
    except ValueError as e:
        return f"reshard refuses: {e}"
    return None
