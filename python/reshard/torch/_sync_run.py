"""move_state_dict's run (_sync.py has the request and its checks): per group of tensors one BatchRedistributor on
reshard's communicator of the members, every tensor's local input and output handed by address, on the current
stream.

- Ranks that hold no source of a tensor, or receive no part of it, hand a placeholder address (the executor reads and
  writes nothing there: the tensor's local sizes on that rank are 0).
- Destinations given by the caller are written in place when dense; otherwise a dense temporary is written and copied
  into them on the same stream.
- Without a memory budget each group's executor (one group, or one per conversion pair) is kept (keyed by the members,
  the layouts, the device and the group) and reused by later calls; with one, each group's executor is freed once its
  group has finished.
"""

import torch
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta

from .. import SyncProgress, _sync_request
from . import _dtensor, _runtime

_prepared = {}  # request key -> BatchRedistributor (calls without a memory budget)
_PREPARED_KEPT = 16
_runtime.clear_hooks.append(_prepared.clear)
_placeholders = {}  # device -> a one-element tensor whose address stands for an empty buffer


def _placeholder(device):
    p = _placeholders.get(device)
    if p is None:
        p = _placeholders[device] = torch.empty(16, dtype=torch.uint8, device=f"cuda:{device}")
    return p


def run(tensors, args, groups, members, me, device, cache_key, progress):
    stream = _runtime.raw_stream(device)
    holder = _placeholder(device).data_ptr()
    results = {}
    keep = []  # dense inputs made here: alive until their group's run is enqueued
    done = done_bytes = 0
    sizes = [t.source.numel() * t.source.element_size() for t in tensors]
    for g, group in enumerate(groups):
        key = cache_key + (g,) if cache_key is not None else None
        redistributor = _prepared.get(key) if key is not None else None
        if redistributor is None:
            redistributor = _runtime.batch_redistributor(members, device, [args[i] for i in group])
            if key is not None:
                if len(_prepared) >= _PREPARED_KEPT:
                    _prepared.clear()
                _prepared[key] = redistributor
        ins, outs, copies_back = [], [], []
        for i in group:
            t = tensors[i]
            if me in t.src.ranks:
                local = t.source._local_tensor
                if not local.is_contiguous():
                    local = local.contiguous()
                    keep.append(local)
                ins.append(local.data_ptr() if local.numel() else holder)
            else:
                ins.append(holder)
            shape = _sync_request.local_shape(t.dst, t.shape, me)
            if shape is None:
                outs.append(holder)
                continue
            out = t.dest
            if out is None:
                out = torch.empty(shape, dtype=t.to_dtype, device=f"cuda:{device}")
            elif not out.is_contiguous():
                dense = torch.empty(shape, dtype=out.dtype, device=out.device)
                copies_back.append((out, dense))
                out = dense
            outs.append(out.data_ptr() if out.numel() else holder)
            results[t.name] = (t, out if t.dest is None else t.dest)
        redistributor.run_ptrs(ins, outs, stream)
        for dest, dense in copies_back:
            dest.copy_(dense)
        _runtime.count_batch(len(group), redistributor.fallback_runs)
        done += len(group)
        done_bytes += sum(sizes[i] for i in group)
        if progress is not None or cache_key is None:
            redistributor.wait(stream)  # the group has finished: report it, or free its executor
            keep.clear()
        if progress is not None:
            progress(SyncProgress(done, len(tensors), done_bytes, sum(sizes), g + 1, len(groups)))
        del redistributor
    return {name: _wrap(t, local) for name, (t, local) in results.items()}


def _wrap(t, local):
    """The target DTensor: the caller's DTensor itself, or a new one around the local result."""
    if t.dest_dtensor is not None:
        return t.dest_dtensor
    meta = TensorMeta(torch.Size(t.shape), _contiguous_stride(t.shape), t.to_dtype)
    return _dtensor.make(local, DTensorSpec(t.target_mesh, t.target_placements, tensor_meta=meta), False)


def _contiguous_stride(shape):
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(1, s)
    return tuple(reversed(stride))
