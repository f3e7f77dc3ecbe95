"""reshard.torch.redistribute_many: many DTensors of one mesh redistributed in one call.

Every tensor is planned as it would be alone; the plans run as one batch (one executor, one run): step k of every
tensor is one exchange, one set of one-sided copies between one ready and one done, small messages coalesced. Members
whose placements do not change are returned as they are (as DTensor.redistribute returns them), members reshard
leaves to PyTorch go through PyTorch one by one (counted in stats()). Differentiable: the backward moves each
gradient back with the single call's rules for Partial inputs, one call per gradient.
"""

import torch
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor._dtensor_spec import DTensorSpec

from . import _autograd, _dtensor, _ops, _runtime
from ._layout import Unsupported

_calls = {}  # (strategy, per member (mesh, placements, tensor meta, target as given)) -> _Call
_CALLS_KEPT = 64
_runtime.clear_hooks.append(_calls.clear)


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
    A repeat with the same layouts (fresh tensors or not) reuses everything decided and prepared the first time.
    """
    dtensors = list(dtensors)
    placements = list(placements)
    strategy = strategy or _runtime.settings.strategy
    grad = torch.is_grad_enabled() and any(getattr(x, "requires_grad", False) for x in dtensors)
    if not grad and not _ops.tracing():
        try:
            key = (strategy, tuple((x._spec.mesh, x._spec.placements, x._spec.tensor_meta,
                                    p if isinstance(p, str) else tuple(p)) for x, p in zip(dtensors, placements)),
                   len(dtensors), len(placements))
            call = _calls.get(key)
        except (AttributeError, TypeError):  # not DTensors, or unhashable placements: the checks below say which
            key = call = None
        if call is not None:
            return call.run(dtensors, requires_grad=False)
    else:
        key = None
    mesh, targets = _checked(dtensors, placements)
    if grad:
        return list(_Many.apply(mesh, tuple(targets), strategy, *dtensors))
    call = _Call(dtensors, mesh, targets, strategy, requires_grad=False)
    if key is not None and not call.uncached:
        if len(_calls) >= _CALLS_KEPT:
            _calls.clear()
        _calls[key] = call
    return call.run(dtensors, requires_grad=False)


def _checked(dtensors, placements):
    """The mesh and every tensor's target placements (normalised as redistribute() does); ValueError/TypeError naming
    the tensor."""
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
    return mesh, targets


class _Call:
    """What one list of layouts does, decided once: per member nothing (the DTensor itself), PyTorch's redistribution,
    or a place in the batch reshard runs; the target specs; the prepared batch."""

    __slots__ = ("actions", "specs", "batch", "members", "strategy", "uncached")

    NOOP, PYTORCH, BATCH = 0, 1, 2

    def __init__(self, dtensors, mesh, targets, strategy, requires_grad):
        n = len(dtensors)
        self.actions = [self.NOOP] * n
        self.specs = [None] * n
        self.strategy = strategy
        self.uncached = False
        self.members, keys = [], []
        for i, (x, placements) in enumerate(zip(dtensors, targets)):
            if x is None:
                self.uncached = True
                continue
            current = x._spec
            if current.placements == placements:
                continue
            target = self.specs[i] = _autograd.target_spec_of(current, mesh, placements)
            local = x._local_tensor
            route = None
            if local.device.type == "cuda":
                try:
                    route = _ops._route(local.dtype, current, target, False, strategy)
                except Unsupported as e:
                    _runtime.count("pytorch", str(e))
            if route is not None and route[0] == "noop":
                self.actions[i] = self.NOOP
                self.specs[i] = target
            elif route is None or route[0] != "reshard":
                self.actions[i] = self.PYTORCH
                self.uncached = True  # counted per call by local_redistribute
            else:
                self.actions[i] = self.BATCH
                self.members.append(i)
                keys.append((route[1], route[2], route[3], route[4], route[5], local.dtype))
        self.batch = None
        if self.members:
            device = dtensors[self.members[0]]._local_tensor.device
            device = device.index if device.index is not None else torch.cuda.current_device()
            self.batch = _prepare(tuple(keys), self.members, strategy, device)

    def run(self, dtensors, requires_grad):
        outs = [None] * len(dtensors)
        moved = _run_batch(self.batch, [dtensors[i]._local_tensor for i in self.members]) if self.batch else ()
        for i, out in zip(self.members, moved):
            outs[i] = _dtensor.make(out, self.specs[i], requires_grad)
        for i, action in enumerate(self.actions):
            x = dtensors[i]
            if action == self.BATCH or x is None:
                continue
            if action == self.PYTORCH:
                local = _autograd.local_redistribute(x._local_tensor, x._spec, self.specs[i], strategy=self.strategy)
                outs[i] = _dtensor.make(local, self.specs[i], requires_grad)
            elif self.specs[i] is not None:  # layouts that differ only on size-1 mesh dims: the same local tensor
                _runtime.count("noop")
                outs[i] = _dtensor.make(x._local_tensor, self.specs[i], requires_grad)
            else:
                _runtime.count("noop")
                outs[i] = x if x.requires_grad == requires_grad else _dtensor.make(x._local_tensor, x._spec,
                                                                                   requires_grad)
        return outs


def _forward(dtensors, mesh, targets, strategy, requires_grad):
    """The redistributed DTensors (None stays None: an unused gradient), on the autograd path. Its decisions and
    prepared batch are kept per list of layouts, as the eager path keeps them: a training step repeats the same list."""
    try:
        key = ("autograd", strategy, tuple((x._spec.mesh, x._spec.placements, x._spec.tensor_meta, tuple(t))
                                           for x, t in zip(dtensors, targets)))
        call = _calls.get(key)
    except (AttributeError, TypeError):  # a None member (an unused gradient) or unhashable placements
        key = call = None
    if call is None:
        call = _Call(dtensors, mesh, targets, strategy, requires_grad)
        if key is not None and not call.uncached:
            if len(_calls) >= _CALLS_KEPT:
                _calls.clear()
            _calls[key] = call
    return call.run(dtensors, requires_grad)


def _run_batch(batch, locals_):
    """New tensors holding every member's target local tensor, the batch run on the current stream."""
    ins, outs, copies = [], [], []
    for local, shape in zip(locals_, batch.out_shapes):
        if not local.is_contiguous():
            local = local.contiguous()
            copies.append(local)  # alive until the run is enqueued: no output may take its block before
        ins.append(local.data_ptr())
        outs.append(local.new_empty(shape))
    batch.redistributor.run_ptrs(ins, [t.data_ptr() for t in outs], _runtime.raw_stream(batch.device))
    _runtime.count_batch(len(locals_), batch.redistributor.fallback_runs)
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
    return _Batch(list(members), redistributor, out_shapes, device)


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
        # Each gradient moves back by redistribute's single call, never as a batch (docs/python.md says why).
        moved = [None if g is None else _autograd.redistribute_forward(g, ctx.mesh, t, ctx.strategy, False)
                 for g, t in zip(grads, targets)]
        out = []
        for g, m, spec in zip(grads, moved, ctx.input_specs):
            if m is not None and m._spec.placements != spec.placements:  # a normalised Partial dim: Replicate
                m = _dtensor.make(m._local_tensor, DTensorSpec(spec.mesh, m._spec.placements,
                                                               tensor_meta=spec.tensor_meta), False)
            out.append(m)
        return (None, None, None, *out)
