"""reshard.torch.redistribute: DTensor.redistribute's semantics, placements, DTensorSpec and autograd, with the local
redistribution done by reshard (PyTorch for what reshard leaves to it).

Forward and backward follow torch.distributed.tensor._redistribute.Redistribute (PyTorch 2.11):
- forward_dtype casts the local tensor before moving it (the result is in that dtype);
- backward: the gradient is cast to backward_dtype (default: the input's dtype) before it moves, moved back to the
  input's placements, where a Partial input dim whose gradient is Shard or Replicate stays Replicate (R->P is
  skipped, S->P becomes S->R), and cast back to the input's dtype.
"""

import torch
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta

from . import _dtensor, _ops, _runtime
from ._layout import Unsupported


def _pytorch_redistribute_local(*args, **kwargs):
    from . import _patch

    return _patch.original()(*args, **kwargs)


_target_specs = {}  # (current spec, mesh, placements) -> target DTensorSpec, reused by repeated calls
_TARGET_SPECS_KEPT = 4096


def target_spec_of(current_spec, device_mesh, placements):
    """The DTensorSpec of current_spec's tensor on `placements`: one object per (spec, mesh, placements), so a
    repeated call builds no spec (a DTensorSpec costs about 10 us of host time) and its cached hash is reused by the
    route lookup. DTensorSpecs are immutable values, shared the same way by PyTorch's sharding propagation cache."""
    key = (current_spec, device_mesh, placements)
    try:
        spec = _target_specs.get(key)
    except TypeError:  # an unhashable spec: build it every time
        return DTensorSpec(device_mesh, placements, tensor_meta=current_spec.tensor_meta)
    if spec is None:
        if len(_target_specs) >= _TARGET_SPECS_KEPT:
            _target_specs.clear()
        spec = _target_specs[key] = DTensorSpec(device_mesh, placements, tensor_meta=current_spec.tensor_meta)
    return spec


def local_redistribute(local, current_spec, target_spec, *, strategy=None, async_op=False):
    """reshard's redistribution of a local tensor, or PyTorch's for what reshard does not take (counted)."""
    try:
        return _ops.redistribute_local(local, current_spec, target_spec, strategy=strategy)
    except Unsupported as e:
        _runtime.count("pytorch", str(e))
        return _pytorch_redistribute_local(local, current_spec, target_spec, async_op=async_op)


def _moved(local, current_spec, device_mesh, placements, strategy, async_op):
    """(local tensor, spec) of `local` (of current_spec) on `placements`: itself where nothing changes, as PyTorch."""
    if current_spec.placements == placements:
        return local, current_spec
    target_spec = target_spec_of(current_spec, device_mesh, placements)
    return local_redistribute(local, current_spec, target_spec, strategy=strategy, async_op=async_op), target_spec


def redistribute_forward(input, device_mesh, placements, strategy, async_op):
    """Redistribute.forward for an input that needs no gradient and no dtype cast (the result needs none either)."""
    output, spec = _moved(input._local_tensor, input._spec, device_mesh, placements, strategy, async_op)
    return _dtensor.make(output, spec, False)


class Redistribute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, device_mesh, placements, async_op=False, forward_dtype=None, backward_dtype=None,
                strategy=None):
        ctx.async_op = async_op
        ctx.backward_dtype = backward_dtype
        ctx.original_dtype = input._local_tensor.dtype
        ctx.strategy = strategy
        if forward_dtype is not None and forward_dtype != input._local_tensor.dtype:
            local_tensor = input._local_tensor.to(dtype=forward_dtype)
            current_spec = DTensorSpec(
                mesh=device_mesh,
                placements=input._spec.placements,
                tensor_meta=TensorMeta(shape=input.shape, stride=input.stride(), dtype=forward_dtype),
            )
        else:
            local_tensor = input._local_tensor
            current_spec = input._spec
        ctx.current_spec = current_spec
        output, target_spec = _moved(local_tensor, current_spec, device_mesh, placements, strategy, async_op)
        return _dtensor.make(output, target_spec, input.requires_grad)

    @staticmethod
    def backward(ctx, grad_output):
        previous_spec = ctx.current_spec
        backward_dtype = ctx.backward_dtype or ctx.original_dtype
        if backward_dtype != grad_output._local_tensor.dtype:
            local_tensor = grad_output._local_tensor.to(dtype=backward_dtype)
            current_spec = DTensorSpec(
                mesh=grad_output._spec.device_mesh,
                placements=grad_output._spec.placements,
                tensor_meta=TensorMeta(shape=grad_output.shape, stride=grad_output.stride(), dtype=backward_dtype),
            )
            previous_spec = DTensorSpec(
                mesh=previous_spec.device_mesh,
                placements=previous_spec.placements,
                tensor_meta=current_spec.tensor_meta,
            )
        else:
            local_tensor = grad_output._local_tensor
            current_spec = grad_output._spec
        normalized = []
        for current, target in zip(current_spec.placements, previous_spec.placements):
            if (current.is_shard() or current.is_replicate()) and target.is_partial():
                normalized.append(torch.distributed.tensor.Replicate())
            else:
                normalized.append(target)
        previous_spec = DTensorSpec(previous_spec.device_mesh, placements=tuple(normalized),
                                    tensor_meta=previous_spec.tensor_meta)
        output = local_redistribute(local_tensor, current_spec, previous_spec, strategy=ctx.strategy,
                                    async_op=ctx.async_op)
        if output.dtype != ctx.original_dtype:
            output = output.to(ctx.original_dtype)
        spec = DTensorSpec(
            previous_spec.device_mesh,
            tuple(normalized),
            tensor_meta=TensorMeta(shape=grad_output.shape, stride=grad_output.stride(), dtype=output.dtype),
        )
        return _dtensor.make(output, spec, grad_output.requires_grad), None, None, None, None, None, None
