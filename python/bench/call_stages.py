"""The host time of each stage of reshard.torch's repeat path, in a call timed alone and back to back (torchrun).

    torchrun --nproc-per-node 2 python/bench/call_stages.py --out DIR [--iters 150]

A repeated eager call that needs no gradient (reshard.torch.redistribute's repeat path) is, in order:
  lookup      the guards, the repeat key and the dictionary lookup
  tracing     the check that no graph is being traced
  alloc       the device and contiguity checks and the output's allocation (PyTorch's caching allocator)
  pointers    the data addresses and the current stream
  run         the prepared executor's run_ptr (C++: the buffer checks, any peer mapping, the enqueued work)
  dtensor     the result DTensor
This script makes exactly those calls with a perf_counter_ns stamp between stages, for mesh (world,) f32 1024x1024
S0->S1, S0->R, R->S0, P->R and P->S0 (and 16384x16384 S0->R and S0->S1), four ways: "alone" (as bench_torch.py times
a call: ranks meet at a barrier, the GPU idle, CUDA events around the call), "idle" (the GPU idle, no barrier: each
call after the previous one's result was waited for), "loop" (10 calls back to back per timed iteration) and "fresh"
(as idle, each call on a new DTensor around a copy of the local tensor, made before the timing starts). Per
stage: the median over iterations (rank 0's, and the slowest rank's total); the CUDA-event time of the call beside. Every result is compared with DTensor.redistribute's, every element. Results: DIR/call_stages.json.
"""

import pathlib
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402
from reshard.torch import _dtensor, _ops, _runtime  # noqa: E402

STAGES = ("lookup", "tracing", "alloc", "pointers", "run", "dtensor")
CASES = [("S0", "S1", (1024, 1024)), ("S0", "R", (1024, 1024)), ("R", "S0", (1024, 1024)), ("P", "R", (1024, 1024)),
         ("P", "S0", (1024, 1024)), ("S0", "R", (16384, 16384)), ("S0", "S1", (16384, 16384))]


def staged_call(x, mesh, dst_p, stamps):
    """reshard.torch.redistribute's repeat path for x (remembered before), stamping the stage boundaries."""
    t0 = time.perf_counter_ns()
    hot = rt._hot.get((x._spec, mesh, tuple(dst_p), rt._runtime.settings.strategy))
    t1 = time.perf_counter_ns()
    traced = _ops.tracing()
    t2 = time.perf_counter_ns()
    spec, entry = hot
    local = x._local_tensor
    redistributor = entry.redistributor
    assert not traced and redistributor is not None and local.get_device() == entry.device and local.is_contiguous()
    _runtime._lru.move_to_end(entry)
    out = local.new_empty(entry.out_shape)
    t3 = time.perf_counter_ns()
    src, dst, stream = local.data_ptr(), out.data_ptr(), _runtime._raw_stream(entry.device)
    t4 = time.perf_counter_ns()
    redistributor.run_ptr(src, dst, stream)
    t5 = time.perf_counter_ns()
    y = _dtensor.make(out, spec, False)
    t6 = time.perf_counter_ns()
    stamps.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5))
    return y


def measure(fn, iters, calls, barrier=True, make=lambda: None):
    """Per iteration: (CUDA-event us per call, stage stamps of its calls) on this rank; fn(stamps, make()), make()'s
    result made before the iteration's timing starts."""
    rows = []
    for _ in range(iters):
        stamps = []
        arg = make()
        if barrier:
            dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            out = fn(stamps, arg)
        end.record()
        torch.cuda.synchronize()
        rows.append((start.elapsed_time(end) * 1e3 / calls, stamps))
    return rows, out


def summarise(rows):
    """Medians: event us per call, and each stage's host us per call (over every call of every iteration)."""
    event = statistics.median(r[0] for r in rows)
    stamps = [s for r in rows for s in r[1]]
    stages = {name: statistics.median(s[i] for s in stamps) / 1e3 for i, name in enumerate(STAGES)}
    host = statistics.median(sum(s) for s in stamps) / 1e3
    return {"event_us": event, "host_us": host, "stages_us": stages}


def main():
    args, rank, world, mesh = common.start(iters=150)
    results = []
    bound = common.exact_bound(world)
    for src, dst, shape in CASES:
        dtype = torch.float32
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global(shape, dtype, 3, bound)
        local = common.local_of(full, mesh, src_p, 3, lambda s, sd: common.make_global(s, dtype, sd, bound))
        x = DTensor.from_local(local, mesh, src_p, shape=full.shape, stride=full.stride())
        iters = args.iters if shape[0] <= 1024 else max(10, args.iters // 5)
        with torch.no_grad():
            want = x.redistribute(mesh, dst_p).to_local()
            for _ in range(3):  # remembered, executor prepared, peers mapped
                rt.redistribute(x, mesh, dst_p)
            torch.cuda.synchronize()
            row = {"case": f"{src}->{dst}", "shape": list(shape)}
            def fresh():  # a new DTensor around a copy of the local tensor, as a training step hands them
                return DTensor.from_local(local.clone(), mesh, src_p, run_check=False, shape=full.shape,
                                          stride=full.stride())

            for mode, calls, barrier, make in (("alone", 1, True, lambda: x), ("idle", 1, False, lambda: x),
                                               ("loop", 10, True, lambda: x), ("fresh", 1, False, fresh)):
                rows, out = measure(lambda stamps, a: staged_call(a, mesh, dst_p, stamps), iters, calls, barrier,
                                    make)
                mine = summarise(rows)
                t = torch.tensor([mine["event_us"], mine["host_us"]], device="cuda", dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                mine["slowest_event_us"], mine["slowest_host_us"] = t.tolist()
                mine["equal"] = common.all_ranks_true(common.same_bits(want, out.to_local()))
                row[mode] = mine
            results.append(row)
        common.log(f"{src}->{dst} {shape}: " + "; ".join(
            f"{m} event {row[m]['slowest_event_us']:.1f} us, host {row[m]['host_us']:.1f} us ("
            + ", ".join(f"{k} {v:.1f}" for k, v in row[m]["stages_us"].items()) + f"), equal {row[m]['equal']}"
            for m in ("alone", "idle", "loop", "fresh")))
        rt.clear_cache()
    common.finish(args.out, "call_stages.json",
                  {"versions": common.versions(), "iters": args.iters, "results": results})


if __name__ == "__main__":
    main()
