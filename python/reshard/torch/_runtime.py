"""The GPU side of reshard.torch: NCCL communicators per mesh, prepared executors per redistribution, and the eager
run on the caller's current stream.

- Communicators: one per (mesh ranks, GPU), created the first time a mesh is used: the mesh's first rank creates an
  ncclUniqueId and publishes it under a fresh key of the default process group's store; every member joins with
  ncclCommInitRankConfig on its current GPU. reshard owns these communicators (PyTorch's are never touched, never
  aborted); mesh-dim groups are split from them once, by the executor.
- Executors: one per (mesh, placements, global shape, dtype, strategy, GPU), built on the first call (collective: every
  rank of the mesh makes the same calls in the same order, as DTensor programs do) and kept in an LRU cache of bounded
  size. A repeat costs a dictionary lookup, one output allocation from PyTorch's caching allocator and one run() that
  enqueues on the current stream; the host never waits.
"""

import atexit
import collections
import os
import threading

import torch
import torch.distributed as dist

from .. import _args, _core, _shapes
from . import _layout

try:
    from .. import _cuda
except ImportError as e:  # built without the CUDA backend (as on CI)
    _cuda = None
    _CUDA_IMPORT_ERROR = str(e)
else:
    _CUDA_IMPORT_ERROR = None


class Settings:
    strategy = "auto"  # default strategy of enable() and of redistribute()
    transport = "auto"
    fuse = "auto"  # one-sided steps as one kernel per rank: auto, always, never
    relay = "auto"  # p2p steps across nodes forward within a node what several of its ranks need: auto, always, never
    low_sm = False  # price SM kernels for running beside compute (auto then prefers the copy engines)
    memory_budget = None  # bytes of workspace per rank; None: no limit
    ranks_per_node = None  # None: torch.cuda.device_count() of this host
    profile = None  # path of a cost-model profile JSON (reshard calibrate); None: the built-in profile
    timeout_s = 600.0  # NCCL calls and waits longer than this abort reshard's communicator
    cache_size = 256  # prepared executors kept (least recently used evicted)


settings = Settings()
_lock = threading.RLock()
_comms = {}  # (mesh ranks, device) -> NcclCommunicator
_generations = collections.Counter()  # mesh ranks -> communicators created (fresh store keys)
_devices = {}  # device ordinal -> CudaDevice
_executors = {}  # key -> Entry
_lru = collections.OrderedDict()  # Entry -> None, least recently used first
_stats = collections.Counter()
clear_hooks = []  # called by clear_cache() and at exit: other prepared executors (redistribute_many's) are dropped
_reasons = collections.Counter()


class Entry:
    """One prepared executor: what a run needs, without looking anything up (identity-hashed in the LRU)."""

    __slots__ = ("redistributor", "out_shape", "complex", "device", "key", "__weakref__")

    def __init__(self, redistributor, out_shape, is_complex, device, key):
        self.redistributor = redistributor  # None once evicted
        self.out_shape = out_shape
        self.complex = is_complex
        self.device = device
        self.key = key


def count(what, reason=None):
    _stats[what] += 1
    if reason is not None:
        _reasons[reason] += 1


def stats():
    with _lock:
        return {
            "reshard": _stats["reshard"],  # eager runs through reshard's executor (compiled graphs' runs included)
            "traced": _stats["traced"],  # calls made while tracing (torch.compile, make_fx): reshard::redistribute nodes
            "noop": _stats["noop"],  # nothing to move (same placements up to size-1 mesh dims)
            "pytorch": _stats["pytorch"],  # left to PyTorch; why: fallback_reasons
            "fallback_reasons": dict(_reasons),
            "batches": _stats["batches"],  # redistribute_many runs through reshard (their tensors count in "reshard")
            # Runs on the NCCL transport because the peers could not map a one-sided plan's buffers (expandable
            # segments, cudaMallocAsync pools): from such a run on, that redistribution runs on its NCCL plan.
            "fallback_runs": sum(e.redistributor.fallback_runs for e in _executors.values() if e.redistributor)
            + _stats["batch_fallback_runs"] + _stats["dropped_fallback_runs"],
            "executors_built": _stats["executors_built"],
            "executors_cached": len(_executors),
            "executors_evicted": _stats["executors_evicted"],
            "communicators": len(_comms),
        }


def count_batch(tensors, fallback_runs):
    """A redistribute_many run of `tensors` members; `fallback_runs`: its executor's runs on the fallback so far."""
    _stats["reshard"] += tensors
    _stats["batches"] += 1
    if fallback_runs:
        _stats["batch_fallback_runs"] += 1


def batch_redistributor(mesh_ranks, device, args):
    """A prepared batch on reshard's communicator of `mesh_ranks` (collective over them)."""
    with _lock:
        _stats["executors_built"] += 1
        return _cuda.BatchRedistributor(communicator(mesh_ranks, device), cuda_device(device), args)


def reset_stats():
    with _lock:
        for key in ("reshard", "traced", "noop", "pytorch", "batches", "batch_fallback_runs", "dropped_fallback_runs"):
            _stats[key] = 0
        _reasons.clear()


def cuda_unavailable_reason():
    if _cuda is None:
        return "reshard built without the CUDA backend"
    if not dist.is_available() or not dist.is_initialized():
        return "torch.distributed is not initialized"
    return None


def _default_store():
    from torch.distributed import distributed_c10d as c10d

    get = getattr(c10d, "_get_default_store", None)
    if get is None:
        raise _layout.Unsupported("no default process group store in this PyTorch")
    return dist.PrefixStore("reshard", get())


def communicator(mesh_ranks, device):
    key = (mesh_ranks, device)
    comm = _comms.get(key)
    if comm is not None:
        return comm
    me = dist.get_rank()
    position = mesh_ranks.index(me)
    _generations[mesh_ranks] += 1
    name = "nccl_id/" + "-".join(map(str, mesh_ranks)) + f"/{_generations[mesh_ranks]}"
    store = _default_store()
    if position == 0:
        uid = _cuda.nccl_unique_id()
        store.set(name, uid)
    else:
        uid = bytes(store.get(name))
    comm = _cuda.NcclCommunicator(uid, len(mesh_ranks), position, device, settings.timeout_s)
    _comms[key] = comm
    return comm


def cuda_device(device):
    d = _devices.get(device)
    if d is None:
        d = _devices[device] = _cuda.CudaDevice(device)
    return d


def plan_args(mesh_shape, src, dst, shape, dtype_name, strategy, buffers_change=True):
    a = _core.PlanArgs()
    a.mesh = "x".join(map(str, mesh_shape))
    a.src = ",".join(src)
    a.dst = ",".join(dst)
    a.shape = "x".join(map(str, shape)) if shape else []
    a.dtype = dtype_name
    # PyTorch hands new tensors on every call: buffers_change (stage small nvlink steps, PlanOptions), unless the
    # caller knows its buffers stay (move_state_dict's rule).
    a.options = _args.plan_options(strategy=strategy, transport=settings.transport, fuse=settings.fuse,
                                   relay=settings.relay, low_sm=bool(settings.low_sm), buffers_change=buffers_change,
                                   memory_budget=settings.memory_budget,
                                   ranks_per_node=int(settings.ranks_per_node or _ranks_per_node()),
                                   profile=settings.profile or None)
    return a


def _ranks_per_node():
    # torchrun's LOCAL_WORLD_SIZE, the same on every rank of a job; the GPUs of this host otherwise.
    return int(os.environ.get("LOCAL_WORLD_SIZE") or max(1, torch.cuda.device_count()))


def check_plannable(mesh_shape, src, dst, shape, dtype_name, strategy):
    """Plans once without a GPU (same on every rank): a ValueError means reshard refuses this redistribution."""
    _core.make_plan(plan_args(mesh_shape, src, dst, shape, dtype_name, strategy), None)


def _build(key, mesh_shape, mesh_ranks, src, dst, shape, dtype_name, is_complex, strategy, device):
    comm = communicator(mesh_ranks, device)
    args = plan_args(mesh_shape, src, dst, shape, dtype_name, strategy)
    redistributor = _cuda.Redistributor(comm, cuda_device(device), args)
    coord = _shapes.mesh_coord(mesh_ranks.index(dist.get_rank()), mesh_shape)
    out_shape = _shapes.local_shape(shape, mesh_shape, dst, coord)
    if is_complex:
        out_shape = out_shape[:-1]  # the trailing 2 of the real view
    entry = Entry(redistributor, tuple(out_shape), is_complex, device, key)
    _executors[key] = entry
    _lru[entry] = None
    _stats["executors_built"] += 1
    while len(_lru) > max(1, int(settings.cache_size)):
        _drop(_lru.popitem(last=False)[0])
        _stats["executors_evicted"] += 1
    return entry


def _drop(entry):
    # Destroying an executor frees its workspace; nothing collective. Holders of the Entry see redistributor None.
    _executors.pop(entry.key, None)
    if entry.redistributor is not None:
        _stats["dropped_fallback_runs"] += entry.redistributor.fallback_runs
    entry.redistributor = None


try:
    raw_stream = _raw_stream = torch._C._cuda_getCurrentRawStream  # the cudaStream_t of the current stream, as an int
except AttributeError:  # pragma: no cover - older PyTorch

    def _raw_stream(device):
        return torch.cuda.current_stream(device).cuda_stream

    raw_stream = _raw_stream


def prepare(local, mesh_shape, mesh_ranks, src, dst, shape, strategy):
    """The Entry that redistributes `local` (src -> dst, canonical text, shape the global shape) on its GPU, built on
    first use (collective over the mesh's ranks)."""
    dtype_name, is_complex = _layout.DTYPES[local.dtype]
    device = local.device.index if local.device.index is not None else torch.cuda.current_device()
    key = _executor_key(mesh_shape, mesh_ranks, src, dst, shape, local.dtype, strategy, device)
    entry = _executors.get(key)
    if entry is None:
        with _lock:
            plan_shape = tuple(shape) + ((2,) if is_complex else ())
            entry = _build(key, mesh_shape, mesh_ranks, src, dst, plan_shape, dtype_name, is_complex, strategy,
                           device)
    return entry


def run_entry(entry, local):
    """`local` redistributed by a prepared Entry on the current stream (a new tensor), or None when the Entry was
    evicted or is for another GPU than `local`'s (the caller then prepares again)."""
    redistributor = entry.redistributor
    if redistributor is None or local.get_device() != entry.device:
        return None
    _lru.move_to_end(entry)
    if not local.is_contiguous():
        local = local.contiguous()
    out = local.new_empty(entry.out_shape)  # local's dtype and device; a method call costs less than torch.empty
    redistributor.run_ptr(local.data_ptr(), out.data_ptr(), _raw_stream(entry.device))
    _stats["reshard"] += 1
    return out


def run(local, mesh_shape, mesh_ranks, src, dst, shape, strategy):
    """Redistributes this rank's local tensor (src -> dst, canonical text, shape the global shape) with reshard's
    executor on the current stream; returns a new tensor holding this rank's target local tensor."""
    return run_entry(prepare(local, mesh_shape, mesh_ranks, src, dst, shape, strategy), local)


def _executor_key(mesh_shape, mesh_ranks, src, dst, shape, dtype, strategy, device):
    dtype_name, is_complex = _layout.DTYPES[dtype]
    return (mesh_ranks, mesh_shape, src, dst, shape, dtype_name, is_complex, strategy, device)


def is_prepared(mesh_shape, mesh_ranks, src, dst, shape, dtype, strategy, device):
    return _executor_key(mesh_shape, mesh_ranks, src, dst, shape, dtype, strategy, device) in _executors


def clear_cache(communicators=False):
    """Drops the prepared executors (their workspace is freed); with communicators=True also reshard's NCCL
    communicators (each rank must call it at the same point, as for any collective teardown)."""
    with _lock:
        if torch.cuda.is_available() and _executors:
            torch.cuda.synchronize()  # nothing of theirs may still run
        for entry in list(_lru):
            _drop(entry)
        _lru.clear()
        for hook in clear_hooks:
            hook()
        if communicators:
            _comms.clear()
            _devices.clear()


@atexit.register
def _shutdown():
    # Before the interpreter (and CUDA) tear down: finish reshard's work, free executors, and release reshard's own
    # communicators with ncclCommAbort, which needs no peer (a peer process may already be gone).
    with _lock:
        try:
            if _executors and torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - at exit, a broken context leaves nothing to do
            pass
        for entry in list(_lru):
            _drop(entry)
        _lru.clear()
        for hook in clear_hooks:
            hook()
        for comm in _comms.values():
            try:
                comm.abort()
            except Exception:  # noqa: BLE001
                pass
        _comms.clear()
        _devices.clear()
