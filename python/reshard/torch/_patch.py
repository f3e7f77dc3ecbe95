"""enable()/disable(): every DTensor redistribution through reshard.

All of DTensor's redistributions meet in torch.distributed.tensor._redistribute.redistribute_local_tensor: explicit
DTensor.redistribute (Redistribute.forward), the ones sharding propagation asks for inside operators
(OpDispatcher.redistribute_local_args), parallelize_module's input/output layouts (they call redistribute), the
backward pass (Redistribute.backward, from_local's backward) and graphs traced by torch.compile. enable() rebinds that
name, in every torch.distributed module that imported it, to a function that tries reshard first and calls PyTorch's
own function for anything reshard does not take (counted in stats() with the reason). It also makes the method
DTensor.redistribute reshard.torch.redistribute for eager calls (the same semantics; it skips PyTorch's layers before
the local redistribution, which cost more than reshard's whole call); calls with keywords reshard does not know and
calls under tracing keep PyTorch's method, which then routes through the rebound function. disable() puts PyTorch's
function and method back everywhere, so PyTorch behaves exactly as before.
"""

import contextlib
import importlib
import sys
import threading

from . import _ops, _runtime
from ._layout import Unsupported

_MODULES = ("torch.distributed.tensor._redistribute", "torch.distributed.tensor._dispatch",
            "torch.distributed.tensor._api")
_NAME = "redistribute_local_tensor"
_lock = threading.RLock()
_original = None
_original_method = None
_method = None  # what DTensor.redistribute is while enabled (set by reshard.torch: set_method)
_enabled = False


def original():
    """PyTorch's redistribute_local_tensor (whether or not reshard is enabled)."""
    global _original
    if _original is None:
        _original = getattr(importlib.import_module(_MODULES[0]), _NAME)
    return _original


def original_method():
    """PyTorch's DTensor.redistribute (whether or not reshard is enabled)."""
    global _original_method
    if _original_method is None:
        from torch.distributed.tensor import DTensor

        _original_method = DTensor.__dict__["redistribute"]
    return _original_method


def set_method(method):
    """The function DTensor.redistribute becomes while enabled."""
    global _method
    _method = method


def _set_dtensor_method(method):
    from torch.distributed.tensor import DTensor

    DTensor.redistribute = method


def redistribute_local_tensor(local_tensor, current_spec, target_spec, *args, **kwargs):
    """Drop-in for PyTorch's redistribute_local_tensor: reshard first, PyTorch for the rest."""
    try:
        return _ops.redistribute_local(local_tensor, current_spec, target_spec,
                                       is_backward=bool(kwargs.get("is_backward", False)))
    except Unsupported as e:
        _runtime.count("pytorch", str(e))
        return original()(local_tensor, current_spec, target_spec, *args, **kwargs)


def _rebind(old, new):
    for name in list(sys.modules):
        if not name.startswith("torch.distributed"):
            continue
        module = sys.modules.get(name)
        if module is not None and getattr(module, _NAME, None) is old:
            setattr(module, _NAME, new)


def enable(strategy=None):
    """Routes every DTensor redistribution of this process through reshard (strategy: auto, collective, p2p or
    hybrid; default: the current setting). Call it on every rank. Graphs torch.compile traced before keep what they
    traced: call torch._dynamo.reset() after enabling or disabling to retrace."""
    global _enabled
    with _lock:
        for m in _MODULES:
            importlib.import_module(m)
        if strategy is not None:
            _runtime.settings.strategy = str(strategy)
        _rebind(original(), redistribute_local_tensor)
        original_method()
        if _method is not None:
            _set_dtensor_method(_method)
        _enabled = True


def disable():
    """Restores PyTorch's redistribution everywhere enable() (or a module imported while enabled) bound reshard's."""
    global _enabled
    with _lock:
        if _original is not None:
            _rebind(redistribute_local_tensor, _original)
        if _original_method is not None:
            _set_dtensor_method(_original_method)
        _enabled = False


def is_enabled():
    return _enabled


@contextlib.contextmanager
def enabled(strategy=None):
    """with reshard.torch.enabled(): ... -- reshard inside the block, the previous state after it."""
    was, previous_strategy = _enabled, _runtime.settings.strategy
    enable(strategy)
    try:
        yield
    finally:
        _runtime.settings.strategy = previous_strategy
        if not was:
            disable()
