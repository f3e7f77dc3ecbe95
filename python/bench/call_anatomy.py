"""Where the time of one redistribution call goes when each call is timed alone (torchrun, 2 or more processes).

    torchrun --nproc-per-node 2 python/bench/call_anatomy.py --out DIR [--iters 40]

For mesh (world,) f32 1024x1024 (4 MiB) S0->S1, S0->R, R->S0, P->R and P->S0, each variant (DTensor.redistribute,
reshard.torch.redistribute, the same with fuse="never" and with transport="nccl") is timed per call two ways:
- "barrier": as python/bench/bench_torch.py (ranks meet at a barrier, the GPU idle, CUDA events around one call);
- "aligned": the same, but after the barrier every rank waits until a common instant of the host's monotonic clock
  (the ranks of one host share it) before it records the first event, so the ranks start the call within about a
  microsecond of each other: the call's own time, without the barrier's skew between ranks.
Per rank and iteration it records when the rank left the barrier (monotonic ns), the host time of the call
(perf_counter around it) and the event time. Reported per variant: the median of the slowest rank's event time, the
median skew (latest minus earliest rank leaving the barrier), and each rank's median host and event times.
Results: DIR/anatomy.json and a table on stdout.
"""

import statistics
import sys
import time
import pathlib

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402

CASES = [("S0", "S1"), ("S0", "R"), ("R", "S0"), ("P", "R"), ("P", "S0")]
ALIGN_AHEAD_NS = 300_000  # the common start: this long after the latest rank left the barrier


def measure(fn, iters, aligned):
    """Per iteration: (left barrier ns, host us of the call, event us of the call) of this rank."""
    rows = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        left = time.monotonic_ns()
        if aligned:
            t = torch.tensor([left], dtype=torch.int64, device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            start_at = int(t.item()) + ALIGN_AHEAD_NS
            while time.monotonic_ns() < start_at:
                pass
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        h0 = time.perf_counter_ns()
        fn()
        h1 = time.perf_counter_ns()
        end.record()
        torch.cuda.synchronize()
        rows.append((left, (h1 - h0) / 1e3, start.elapsed_time(end) * 1e3))
    return rows


def summarise(per_rank):
    """per_rank[r][i] = (left ns, host us, event us) -> summary figures."""
    iters = len(per_rank[0])
    slowest = [max(rk[i][2] for rk in per_rank) for i in range(iters)]
    skew = [(max(rk[i][0] for rk in per_rank) - min(rk[i][0] for rk in per_rank)) / 1e3 for i in range(iters)]
    return {
        "slowest_event_us": statistics.median(slowest),
        "skew_us": statistics.median(skew),
        "host_us": [statistics.median(x[1] for x in rk) for rk in per_rank],
        "event_us": [statistics.median(x[2] for x in rk) for rk in per_rank],
    }


def main():
    args, rank, world, mesh = common.start(iters=40)
    shape = (1024, 1024)
    results = []
    for src, dst in CASES:
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        bound = common.exact_bound(world)
        full = common.make_global(shape, torch.float32, 3, bound)
        local = common.local_of(full, mesh, src_p, 3, lambda s, sd: common.make_global(s, torch.float32, sd, bound))
        x = DTensor.from_local(local, mesh, src_p, shape=full.shape, stride=full.stride())
        variants = [("pytorch", {}, lambda: x.redistribute(mesh, dst_p)),
                    ("reshard", {}, lambda: rt.redistribute(x, mesh, dst_p)),
                    ("reshard fuse=never", {"fuse": "never"}, lambda: rt.redistribute(x, mesh, dst_p)),
                    ("reshard nccl", {"transport": "nccl"}, lambda: rt.redistribute(x, mesh, dst_p))]
        with torch.no_grad():
            for name, settings, fn in variants:
                if settings:
                    rt.configure(**settings)
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
                row = {"case": f"{src}->{dst}", "variant": name}
                for mode in ("barrier", "aligned"):
                    mine = measure(fn, args.iters, mode == "aligned")
                    gathered = [None] * world
                    dist.all_gather_object(gathered, mine)
                    row[mode] = summarise(gathered)
                if settings:
                    rt.configure(fuse="auto", transport="auto")
                results.append(row)
                b, a = row["barrier"], row["aligned"]
                common.log(f"{row['case']:7} {name:19} barrier {b['slowest_event_us']:7.1f} us (skew "
                           f"{b['skew_us']:5.1f}, host {'/'.join(f'{h:.1f}' for h in b['host_us'])}, event "
                           f"{'/'.join(f'{e:.1f}' for e in b['event_us'])}) | aligned {a['slowest_event_us']:7.1f} us "
                           f"(skew {a['skew_us']:5.1f}, host {'/'.join(f'{h:.1f}' for h in a['host_us'])}, event "
                           f"{'/'.join(f'{e:.1f}' for e in a['event_us'])})")
        rt.clear_cache()
    common.finish(args.out, "anatomy.json", {"versions": common.versions(), "iters": args.iters, "results": results})


if __name__ == "__main__":
    main()
