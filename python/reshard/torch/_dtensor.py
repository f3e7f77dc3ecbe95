"""Building the DTensor that wraps a redistributed local tensor, at the cost of the constructor alone.

DTensor(local, spec, requires_grad=...) runs PyTorch's C++ constructor (torch.Tensor._dtensor__new__ where it exists)
and then DTensor.__init__, which only calls torch.Tensor.__init__ but is wrapped for dynamo and export tracing (two
Python decorators: a few microseconds per call). Eager code needs neither wrapper, so make() calls the constructor and
sets the two attributes it sets; under tracing, reshard.torch never builds DTensors itself (the traced graph holds
the reshard::redistribute op and PyTorch builds them).
"""

import torch
from torch.distributed.tensor import DTensor

_dtensor_new = getattr(torch.Tensor, "_dtensor__new__", None)


def make(local, spec, requires_grad):
    """The DTensor of local tensor `local` and DTensorSpec `spec`, as DTensor(local, spec, requires_grad=...)."""
    if _dtensor_new is not None:
        r = _dtensor_new(DTensor, local, spec, requires_grad=requires_grad)
    else:  # PyTorch before _dtensor__new__: DTensor.__new__'s own steps
        meta = spec.tensor_meta
        r = torch.Tensor._make_wrapper_subclass(DTensor, meta.shape, strides=meta.stride, dtype=local.dtype,
                                                device=local.device, layout=local.layout, requires_grad=requires_grad)
    r._spec = spec
    r._local_tensor = local
    return r
