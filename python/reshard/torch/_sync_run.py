"""move_state_dict's run (_sync.py has the request, its checks and the pieces): per group of pieces one
BatchRedistributor on reshard's communicator of the members, every piece's local input and output handed by address,
on the current stream, with the conversion routes' work before and after (_sync_request.conversion_route).

- Ranks that hold no source of a piece, or receive no part of it, hand a placeholder address (the executor reads and
  writes nothing there: the piece's local sizes on that rank are 0).
- Before the first group holding a piece of a tensor, its source ranks convert ("sender": torch's copy_ into a staging
  tensor of the target dtype, the conversion tensor.to() makes) or quantize ("block_sender": codes and scales, the
  quantize_blocks kernel) their local tensor; the pieces then move the staging tensors. After the group holding a
  "block_receiver" tensor's piece, each target rank quantizes the source-dtype staging tensor it received into the
  destination and its scales.
- Destinations given by the caller are written in place when dense; otherwise a dense temporary is written and copied
  into them on the same stream.
- Without a memory budget each group's executor (one group, or one per conversion pair) and the routes' staging
  tensors are kept (keyed by the decision's token, the device and the group) and reused by later calls, so a repeat
  call allocates nothing but the new targets it returns; with one, each group's executor and staging are freed once
  its group has finished.
"""

import torch
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta

from .. import SyncProgress, _sync_request
from . import _dtensor, _layout, _runtime

_prepared = {}  # request key -> BatchRedistributor (calls without a memory budget)
_staging = {}  # (request key, tensor index, what) -> a staging tensor of a conversion route (no memory budget)
_PREPARED_KEPT = 16
_runtime.clear_hooks.append(_prepared.clear)
_runtime.clear_hooks.append(_staging.clear)
_placeholders = {}  # device -> a one-element tensor whose address stands for an empty buffer


def forget():
    """Drops every kept executor and staging tensor (their decisions were forgotten)."""
    _prepared.clear()
    _staging.clear()


def _placeholder(device):
    p = _placeholders.get(device)
    if p is None:
        p = _placeholders[device] = torch.empty(16, dtype=torch.uint8, device=f"cuda:{device}")
    return p


class _Call:
    """One call's buffers: staging tensors (kept across calls under `cache_key`, else for this call) and outputs."""

    def __init__(self, device, cache_key):
        self.device, self.cache_key = device, cache_key
        self.made = {}

    def staging(self, i, what, shape, dtype):
        key = (self.cache_key, i, what)
        x = _staging.get(key) if self.cache_key is not None else self.made.get(key)
        if x is None:
            x = torch.empty(shape, dtype=dtype, device=f"cuda:{self.device}")
            if self.cache_key is not None:
                if len(_staging) >= 64 * _PREPARED_KEPT:
                    _staging.clear()
                _staging[key] = x
            else:
                self.made[key] = x
        return x


def _quantize(x, to, out, scales, block, device, stream):
    """Block-scaled fp8 of the dense 2-D tensor x into out (fp8) and scales (float32) on `stream`."""
    rows, cols = x.shape
    _runtime._cuda.quantize_blocks(x.data_ptr(), _layout.dtype_name(x.dtype), rows, cols, out.data_ptr(),
                                   _layout.dtype_name(to), scales.data_ptr(), block, device, stream)


def _before(t, i, me, call, stream):
    """The senders' part of t's route: {what: staging tensor} the pieces move instead of the source local tensor."""
    if t.route not in ("sender", "block_sender") or me not in t.src.ranks:
        return {}
    local = t.source._local_tensor
    if not local.is_contiguous():
        local = local.contiguous()
    if t.route == "sender":
        narrow = call.staging(i, "narrow", tuple(local.shape), t.to_dtype)
        narrow.copy_(local)
        return {"data": narrow}
    grid = _sync_request.local_shape(t.src, _sync_request.scale_grid_shape(t.shape, t.block), me)
    codes = call.staging(i, "codes", tuple(local.shape), t.to_dtype)
    scales = call.staging(i, "scales", grid, torch.float32)
    if local.numel():
        _quantize(local, t.to_dtype, codes, scales, t.block, call.device, stream)
    return {"data": codes, "scales": scales}


def run(tensors, pieces, args, groups, members, me, device, cache_key, progress):
    stream = _runtime.raw_stream(device)
    holder = _placeholder(device).data_ptr()
    call = _Call(device, cache_key)
    outputs = {}  # tensor index -> (data output, scales output or None)
    staged = {}  # tensor index -> what _before made
    received = {}  # tensor index -> a block_receiver's source-dtype staging
    keep = []  # dense inputs made here: alive until their group's run is enqueued
    last_group = {}
    for g, group in enumerate(groups):
        for k in group:
            last_group[pieces[k][0]] = g
    done = done_bytes = 0
    sizes = [t.source.numel() * t.source.element_size() for t in tensors]
    for g, group in enumerate(groups):
        key = cache_key + (g,) if cache_key is not None else None
        redistributor = _prepared.get(key) if key is not None else None
        if redistributor is None:
            redistributor = _runtime.batch_redistributor(members, device, [args[k] for k in group])
            if key is not None:
                if len(_prepared) >= _PREPARED_KEPT:
                    _prepared.clear()
                _prepared[key] = redistributor
        ins, outs, copies_back = [], [], []
        for k in group:
            i, piece = pieces[k]
            t = tensors[i]
            if i not in staged:
                staged[i] = _before(t, i, me, call, stream)
            ins.append(_input(t, piece, staged[i], me, holder, keep))
            outs.append(_output(t, i, piece, me, call, outputs, received, copies_back, holder))
        redistributor.run_ptrs(ins, outs, stream)
        for k in group:
            i = pieces[k][0]
            if last_group[i] == g and i in received:
                data, scales = outputs[i]
                _quantize(received[i], tensors[i].to_dtype, data, scales, tensors[i].block, device, stream)
        for dest, dense in copies_back:
            dest.copy_(dense)
        _runtime.count_batch(len(group), redistributor.fallback_runs)
        finished = [i for i, last in last_group.items() if last == g]
        done += len(finished)
        done_bytes += sum(sizes[i] for i in finished)
        if progress is not None or cache_key is None:
            redistributor.wait(stream)  # the group has finished: report it, or free its executor and staging
            keep.clear()
            if cache_key is None:
                for i in finished:
                    staged.pop(i, None)
                    received.pop(i, None)
                    for k in [k for k in call.made if k[1] == i]:
                        del call.made[k]
        if progress is not None:
            progress(SyncProgress(done, len(tensors), done_bytes, sum(sizes), g + 1, len(groups)))
        del redistributor
    results = {}
    for i, (data, scales) in outputs.items():
        t = tensors[i]
        results[t.name] = _wrap(t, "data", data, t.shape, t.to_dtype, t.dest_dtensor, t.dest)
        if scales is not None:
            grid = _sync_request.scale_grid_shape(t.shape, t.block)
            results[t.scale_name()] = _wrap(t, "scales", scales, grid, torch.float32, t.scales_dest_dtensor,
                                            t.scales_dest)
    return results


def _input(t, piece, staged, me, holder, keep):
    """The address a piece reads on this rank."""
    if me not in t.src.ranks:
        return holder
    local = staged.get(piece.role)
    if local is None:
        local = t.source._local_tensor
        if not local.is_contiguous():
            local = local.contiguous()
            keep.append(local)
    return local.data_ptr() if local.numel() else holder


def _output(t, i, piece, me, call, outputs, received, copies_back, holder):
    """The address a piece writes on this rank: the destination (the caller's, dense, or a dense temporary copied
    into it afterwards; else a new tensor), its scales, or a block_receiver's staging."""
    data_shape = _sync_request.local_shape(t.dst, t.shape, me)
    if data_shape is None:
        return holder
    if i not in outputs:  # the tensor's destinations, made on its first piece
        scales = None
        if t.block is not None:
            grid = _sync_request.local_shape(t.dst, _sync_request.scale_grid_shape(t.shape, t.block), me)
            scales = _destination(t.scales_dest, grid, torch.float32, call, copies_back)
        outputs[i] = (_destination(t.dest, data_shape, t.to_dtype, call, copies_back), scales)
    data, scales = outputs[i]
    if piece.role == "scales":
        out = scales
    elif t.route == "block_receiver":
        out = received[i] = call.staging(i, "received", data_shape, t.dtype)
    else:
        out = data
    return out.data_ptr() if out.numel() else holder


def _destination(given, shape, dtype, call, copies_back):
    """A dense tensor to write: `given` itself, a dense temporary copied into it after the run, or a new tensor."""
    if given is None:
        return torch.empty(shape, dtype=dtype, device=f"cuda:{call.device}")
    if given.is_contiguous():
        return given
    dense = torch.empty(shape, dtype=given.dtype, device=given.device)
    copies_back.append((given, dense))
    return dense


def _wrap(t, role, local, shape, dtype, dest_dtensor, dest):
    """The target DTensor: the caller's DTensor itself, or a new one around the local result (the caller's local
    destination where it gave one), its spec made once per tensor and role and shared by later calls."""
    if dest_dtensor is not None:
        return dest_dtensor
    if dest is not None:
        local = dest
    spec = t.specs.get(role)
    if spec is None:
        meta = TensorMeta(torch.Size(shape), _contiguous_stride(shape), dtype)
        spec = t.specs[role] = DTensorSpec(t.target_mesh, t.target_placements, tensor_meta=meta)
    return _dtensor.make(local, spec, False)


def _contiguous_stride(shape):
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(1, s)
    return tuple(reversed(stride))
