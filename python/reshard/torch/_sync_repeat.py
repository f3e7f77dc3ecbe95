"""move_state_dict's repeat request: a call naming the same objects with the same layouts as the last call reuses the
last call's checked tensors (_sync._request's result) instead of checking every layout again.

The rule: the last request is kept as its checked tensors without their buffers, and a fingerprint holding the
caller's objects only weakly (a kept request never keeps a tensor alive): the names in order; per name the source
(the same DTensor object) and the target (the same DTensor, or a (mesh, placements[, tensor]) of the same length
whose mesh is the same object and whose placements are equal: its local tensor, like every local buffer, is checked
by _sync._local_problem on every call, so any tensor will do); dtype and block_scales equal; scales naming the same
DTensors where they named DTensors; the same world size. A DTensor's mesh, placements, shape and dtype cannot change,
so the same objects pass the same checks. On a match the buffers (source, destination, the scales' destination) are
taken from this call's objects.
"""

import collections.abc
import weakref

_last = None  # (_Fingerprint, checked tensors) of the last request


class _Entry:
    """One name's objects, held weakly."""

    __slots__ = ("name", "source", "target", "kind", "mesh", "placements", "size")


class _Fingerprint:
    __slots__ = ("entries", "world", "dtype", "blocks", "scales")


def _weak(x):
    return None if x is None else weakref.ref(x)


def _alive(ref):
    return None if ref is None else ref()


def _mapping_copy(value):
    return dict(value) if isinstance(value, collections.abc.Mapping) else value


def _same_option(given, kept):
    """dtype= or block_scales= as kept: the same object, or an equal mapping (of dtypes or ints)."""
    if isinstance(kept, dict):
        return isinstance(given, collections.abc.Mapping) and dict(given) == kept
    return given is kept or (type(given) is type(kept) and given == kept)


def remember(sources, targets, dtype, block_scales, scales, world, tensors):
    """Keeps `tensors` (this call's checked request) for later calls naming the same objects."""
    global _last
    from torch.distributed.tensor import DTensor

    _last = None
    fp = _Fingerprint()
    fp.entries, fp.world = [], world
    fp.dtype, fp.blocks = _mapping_copy(dtype), _mapping_copy(block_scales)
    try:
        fp.scales = None if scales is None else {k: _weak(v) if isinstance(v, DTensor) else None
                                                 for k, v in scales.items()}
        for name, x in sources.items():
            e, target = _Entry(), targets[name]
            e.name, e.source = name, weakref.ref(x)
            if isinstance(target, DTensor):
                e.kind, e.target = "dtensor", weakref.ref(target)
            else:
                e.kind, e.size = "tuple", len(target)
                e.mesh, e.placements = weakref.ref(target[0]), tuple(target[1])
            fp.entries.append(e)
    except TypeError:  # an object without weak references: not kept
        return
    _last = (fp, tensors)


def _target_matches(e, target):
    if e.kind == "dtensor":
        return target is _alive(e.target)
    if type(target) not in (tuple, list) or len(target) != e.size or target[0] is not _alive(e.mesh):
        return False
    try:
        return tuple(target[1]) == e.placements
    except TypeError:
        return False


def reuse(sources, targets, dtype, block_scales, scales, world):
    """The last request's checked tensors with this call's buffers where this call names the same objects, else
    None."""
    if _last is None:
        return None
    fp, tensors = _last
    if (world != fp.world or len(sources) != len(fp.entries) or len(targets) != len(sources)
            or not _same_option(dtype, fp.dtype) or not _same_option(block_scales, fp.blocks)):
        return None
    from torch.distributed.tensor import DTensor

    # Every object is read once and the objects checked are the ones used (a mapping may answer differently each time).
    items = list(sources.items())
    chosen = [targets.get(name) for name, _ in items]
    if len(items) != len(fp.entries):
        return None
    if isinstance(scales, collections.abc.Mapping):
        scales = dict(scales)
    if scales is None or fp.scales is None:
        if scales is not fp.scales:
            return None
    elif not isinstance(scales, collections.abc.Mapping) or scales.keys() != fp.scales.keys():
        return None
    else:
        for k, v in scales.items():  # the same DTensors; local tensors (checked every call) where there were some
            kept = fp.scales[k]
            if (v is not _alive(kept)) if kept is not None else isinstance(v, DTensor):
                return None
    for (name, x), target, e in zip(items, chosen, fp.entries):
        if name != e.name or x is not _alive(e.source) or not _target_matches(e, target):
            return None
    for t, (name, x), target in zip(tensors, items, chosen):
        t.source = x
        if isinstance(target, DTensor):
            t.dest_dtensor, t.dest = target, target._local_tensor
        else:
            t.dest_dtensor, t.dest = None, target[2] if len(target) == 3 else None
        if t.block is not None:
            dest = scales.get(name) if scales is not None else None
            if isinstance(dest, DTensor):
                t.scales_dest_dtensor, t.scales_dest = dest, dest._local_tensor
            else:
                t.scales_dest_dtensor, t.scales_dest = None, dest
    return tensors


def release(tensors):
    """Drops the buffers of kept tensors after their call (a kept request holds no tensor)."""
    for t in tensors:
        t.source = t.dest = t.dest_dtensor = t.scales_dest = t.scales_dest_dtensor = None


def forget():
    """Drops the kept request (clear_cache)."""
    global _last
    _last = None
