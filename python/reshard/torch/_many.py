"""reshard.torch.redistribute_many: many DTensors of one mesh redistributed in one call.

Every tensor is planned as it would be alone; the plans run as one batch (one executor, one run): step k of every
tensor is one exchange, one set of one-sided copies between one ready and one done, small messages coalesced. Members
whose placements do not change are returned as they are (as DTensor.redistribute returns them), members reshard
leaves to PyTorch go through PyTorch one by one (counted in stats()). Differentiable: the backward moves every
gradient back in one batch, with the single call's rules for Partial inputs.
"""

import torch
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor._dtensor_spec import DTensorSpec

from . import _autograd, _dtensor, _ops, _runtime
from ._layout import Unsupported

_batches = {}  # (member keys, strategy) -> _Batch
_BATCHES_KEPT = 64
_runtime.clear_hooks.append(_batches.clear)


class _Batch:
    """A prepared batch: the members reshard moves (their index in the call) and the executor for them."""

    __slots__ = ("members", "redistributor", "out_shapes", "device")

    def __init__(self, members, redistributor, out_shapes, device):
        self.members = members
        self.redistributor = redistributor
        self.out_shapes = out_shapes
        self.device = device


def redistribute_many(dtensors, placements, *, strategy=None):
    """[x.redistribute(x.device_mesh, p) for x, p in zip(dtensors, placements)] as one redistribution.

    dtensors: DTensors on one mesh (any shapes and dtypes); placements: one target per tensor (PyTorch placement
    objects or reshard's text, as redistribute() takes). Returns the list of redistributed DTensors, each equal
    (bitwise) to DTensor.redistribute's. Every rank of the mesh calls it with the same layouts, in the same order.
    """
    dtensors = list(dtensors)
    placements = list(placements)
    if not dtensors:
        raise ValueError("redistribute_many needs at least one DTensor")
    if len(placements) != len(dtensors):
        raise ValueError(f"redistribute_many got {len(dtensors)} DTensors and {len(placements)} placements")
    from . import _target_placements

    mesh = None
    targets = []
    for i, (x, p) in enumerate(zip(dtensors, placements)):
        if not isinstance(x, DTensor):
            raise TypeError(f"redistribute_many: item {i} is a {type(x).__name__}, not a DTensor")
        if mesh is None:
            mesh = x.device_mesh
        elif x.device_mesh != mesh:
            raise ValueError(f"redistribute_many: DTensor {i} is on another mesh than DTensor 0 (one mesh per call)")
        targets.append(_target_placements(p, x.placements, x.ndim))
    strategy = strategy or _runtime.settings.strategy
    if any(x.requires_grad for x in dtensors) and torch.is_grad_enabled():
        return list(_Many.apply(mesh, tuple(targets), strategy, *dtensors))
    return _forward(dtensors, mesh, targets, strategy, requires_grad=False)


def _forward(dtensors, mesh, targets, strategy, requires_grad):
    """The redistributed DTensors (None stays None: an unused gradient)."""
    n = len(dtensors)
    specs = [None] * n
    outs = [None] * n
    members, keys = [], []
    for i, (x, placements) in enumerate(zip(dtensors, targets)):
        if x is None:
            continue
        current = x._spec
        if current.placements == placements:
            outs[i] = x if x.requires_grad == requires_grad else _dtensor.make(x._local_tensor, current, requires_grad)
            _runtime.count("noop")
            continue
        target = specs[i] = _autograd.target_spec_of(current, mesh, placements)
        local = x._local_tensor
        route = None
        if not _ops.tracing() and local.device.type == "cuda":
            try:
                route = _ops._route(local.dtype, current, target, False, strategy)
            except Unsupported as e:
                _runtime.count("pytorch", str(e))
        if route is None or route[0] != "reshard":
            if route is not None and route[0] == "noop":
                _runtime.count("noop")
                outs[i] = _dtensor.make(local, target, requires_grad)
            else:
                outs[i] = _dtensor.make(_autograd.local_redistribute(local, current, target, strategy=strategy), target,
                                        requires_grad)
            continue
        members.append(i)
        keys.append((route[1], route[2], route[3], route[4], route[5], local.dtype))
    if members:
        locals_ = [dtensors[i]._local_tensor for i in members]
        moved = _run_batch(tuple(keys), tuple(members), strategy, locals_)
        for i, out in zip(members, moved):
            outs[i] = _dtensor.make(out, specs[i], requires_grad)
    return outs


def _run_batch(keys, members, strategy, locals_):
    key = (keys, strategy)
    batch = _batches.get(key)
    device = locals_[0].device.index if locals_[0].device.index is not None else torch.cuda.current_device()
    if batch is None or batch.device != device:
        batch = _prepare(keys, members, strategy, device)
        if len(_batches) >= _BATCHES_KEPT:
            _batches.clear()
        _batches[key] = batch
    ins = []
    outs = []
    for local, shape in zip(locals_, batch.out_shapes):
        if local.get_device() != device:
            raise ValueError("redistribute_many: every local tensor must be on this rank's one GPU")
        if not local.is_contiguous():
            local = local.contiguous()
        ins.append(local)
        outs.append(local.new_empty(shape))
    batch.redistributor.run_ptrs([t.data_ptr() for t in ins], [t.data_ptr() for t in outs], _runtime.raw_stream(device))
    _runtime.count_batch(len(members), batch.redistributor.fallback_runs)
    return outs


def _prepare(keys, members, strategy, device):
    import torch.distributed as dist

    from .. import _shapes
    from ._layout import DTYPES

    args, out_shapes = [], []
    mesh_ranks = keys[0][1]
    for mesh_shape, ranks, src, dst, shape, dtype in keys:
        dtype_name, is_complex = DTYPES[dtype]
        plan_shape = tuple(shape) + ((2,) if is_complex else ())
        args.append(_runtime.plan_args(mesh_shape, src, dst, plan_shape, dtype_name, strategy))
        coord = _shapes.mesh_coord(ranks.index(dist.get_rank()), mesh_shape)
        out_shape = _shapes.local_shape(plan_shape, mesh_shape, dst, coord)
        out_shapes.append(tuple(out_shape[:-1] if is_complex else out_shape))
    redistributor = _runtime.batch_redistributor(mesh_ranks, device, args)
    return _Batch(members, redistributor, out_shapes, device)


def _backward_placements(grad_spec, input_spec):
    """Redistribute.backward's rule: a Partial input dim whose gradient is Shard or Replicate becomes Replicate."""
    out = []
    for current, target in zip(grad_spec.placements, input_spec.placements):
        if (current.is_shard() or current.is_replicate()) and target.is_partial():
            out.append(Replicate())
        else:
            out.append(target)
    return tuple(out)


class _Many(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mesh, targets, strategy, *inputs):
        ctx.mesh = mesh
        ctx.strategy = strategy
        ctx.input_specs = [x._spec for x in inputs]
        return tuple(_forward(list(inputs), mesh, list(targets), strategy, requires_grad=True))

    @staticmethod
    def backward(ctx, *grads):
        targets = [None if g is None else _backward_placements(g._spec, spec)
                   for g, spec in zip(grads, ctx.input_specs)]
        moved = _forward(list(grads), ctx.mesh, targets, ctx.strategy, requires_grad=False)
        out = []
        for g, m, spec in zip(grads, moved, ctx.input_specs):
            if m is not None and m._spec.placements != spec.placements:  # a normalised Partial dim: Replicate
                m = _dtensor.make(m._local_tensor, DTensorSpec(spec.mesh, m._spec.placements,
                                                               tensor_meta=spec.tensor_meta), False)
            out.append(m)
        return (None, None, None, *out)
