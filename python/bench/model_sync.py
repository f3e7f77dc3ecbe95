"""Whole parameter sets moved from a training layout to a serving layout, as a training step or a weight sync hands
them over: fresh tensors from PyTorch's caching allocator on every call, from Python, one process per GPU.

    torchrun --nproc-per-node 4 python/bench/model_sync.py --out DIR [--sets llama3_8b,llama3_70b_8l,qwen3_moe_layer]

Sets (bf16, real model shapes): Llama-3-8B (291 tensors), eight layers of Llama-3-70B (73), one Qwen3-MoE-style layer
with 128 experts (392). Training layout FSDP2 (Shard(0) on the world's mesh); serving layout tensor parallel: colwise
weights (q, k, v, gate, up, embedding, lm_head, router) Shard(0), rowwise weights (o, down) Shard(1), norms Replicate.
Variants, timed in the same run, each over --iters iterations after --warmup untimed ones: DTensor.redistribute one by
one (PyTorch); reshard.torch.redistribute one by one (auto, and transport nccl and nvlink); redistribute_many (auto and
nccl). Every iteration takes fresh copies of every source tensor (not timed) and the timed part is the whole set, the
slowest rank's CUDA-event time after a barrier; medians reported. The bound: the most bytes any rank must receive from
other ranks, over the per-GPU receive bandwidth measured in the same run with every GPU sending to every other at once
(link_gbps: the faster of copy engines and NCCL); a variant faster than its bound is flagged ("beats_bound": the probe
under-measured the link). Every result of every variant equal, bit for bit, to PyTorch's. Then the single-tensor
cases (4096x14336 and 4096x4096 bf16 S0->S1): fresh and reused tensors, and the host time of one call with the GPU
idle.
Results: DIR/model_sync.json and a table on stdout.
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402

COLWISE, ROWWISE, NORM = "col", "row", "norm"


def llama(layers, hidden, inter, kv, vocab, embeddings=True):
    """(name, shape, serving role) of a Llama-style decoder."""
    out = [("embed", (vocab, hidden), COLWISE)] if embeddings else []
    for i in range(layers):
        p = f"layers.{i}."
        out += [(p + "q", (hidden, hidden), COLWISE), (p + "k", (kv, hidden), COLWISE),
                (p + "v", (kv, hidden), COLWISE), (p + "o", (hidden, hidden), ROWWISE),
                (p + "gate", (inter, hidden), COLWISE),
                (p + "up", (inter, hidden), COLWISE), (p + "down", (hidden, inter), ROWWISE),
                (p + "input_norm", (hidden,), NORM), (p + "post_norm", (hidden,), NORM)]
    if embeddings:
        out += [("norm", (hidden,), NORM), ("lm_head", (vocab, hidden), COLWISE)]
    return out


def qwen3_moe_layer(hidden=2048, heads=32, kv_heads=4, head_dim=128, experts=128, inter=768):
    out = [("q", (heads * head_dim, hidden), COLWISE), ("k", (kv_heads * head_dim, hidden), COLWISE),
           ("v", (kv_heads * head_dim, hidden), COLWISE), ("o", (hidden, heads * head_dim), ROWWISE),
           ("router", (experts, hidden), COLWISE), ("input_norm", (hidden,), NORM), ("post_norm", (hidden,), NORM)]
    for e in range(experts):
        out += [(f"experts.{e}.gate", (inter, hidden), COLWISE), (f"experts.{e}.up", (inter, hidden), COLWISE),
                (f"experts.{e}.down", (hidden, inter), ROWWISE)]
    out += [("q_norm", (head_dim,), NORM)]
    return out


SETS = {
    "llama3_8b": lambda: llama(32, 4096, 14336, 1024, 128256),
    "llama3_70b_8l": lambda: llama(8, 8192, 28672, 1024, 128256, embeddings=False) + [("norm", (8192,), NORM)],
    "qwen3_moe_layer": qwen3_moe_layer,
}
SERVING = {COLWISE: lambda nd: Shard(0), ROWWISE: lambda nd: Shard(1) if nd > 1 else Shard(0),
           NORM: lambda nd: Replicate()}


def chunk(n, parts, i):
    full = (n + parts - 1) // parts
    return min(n, full * i), min(n, full * (i + 1))


def received_bytes(shape, src, dst, world, rank, es):
    """Bytes rank `rank` needs in its target shard that its source shard does not hold (1-D mesh, Shard/Replicate)."""
    def box(p):
        return [chunk(s, world, rank) if isinstance(p, Shard) and p.dim == d else (0, s) for d, s in enumerate(shape)]
    target, source = box(dst), box(src)
    need = held = 1
    for (a, b), (c, d) in zip(target, source):
        need *= b - a
        held *= max(0, min(b, d) - max(a, c))
    return (need - held) * es


def _slowest_median(move, iters):
    """The slowest rank's median time (s) of move() over `iters` calls, each after a barrier."""
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        move()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    t = torch.tensor([statistics.median(times)], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def link_gbps(world, rank, senders=None, receivers=None, mib=256, iters=5):
    """Per-GPU receive bandwidth of a pattern: every rank of `senders` (default: all) sends `mib` MiB to every other
    rank of `receivers` (default: all) at once. Moved two ways, each timed as the slowest rank's median: copy engines
    (one stream per peer, each process writing into buffers it allocates on the others) and NCCL (one all_to_all_single
    of the world, zero bytes between the other pairs).
    Returns (GB/s, {method: GB/s}): the bytes the receiver with the most senders gets over the time, the faster way's
    figure, so that a bound taken from it is never slower than a way of moving the bytes that exists."""
    senders = list(range(world)) if senders is None else list(senders)
    receivers = list(range(world)) if receivers is None else list(receivers)
    n = mib << 20
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    sends = [n if rank in senders and p in receivers and p != rank else 0 for p in range(world)]
    gets = [n if rank in receivers and p in senders and p != rank else 0 for p in range(world)]
    most = max(sum(1 for s in senders if s != r) for r in receivers)
    dsts = {p: torch.empty(n, dtype=torch.uint8, device=f"cuda:{p}") for p in range(world) if sends[p]}
    streams = {p: torch.cuda.Stream() for p in dsts}
    outbox = torch.empty(sum(sends), dtype=torch.uint8, device="cuda")
    inbox = torch.empty(sum(gets), dtype=torch.uint8, device="cuda")

    def pushes():
        for p, d in dsts.items():
            streams[p].wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(streams[p]):
                d.copy_(src, non_blocking=True)
        for s in streams.values():
            torch.cuda.current_stream().wait_stream(s)

    def nccl():  # every rank calls it (a collective of the world)
        dist.all_to_all_single(inbox, outbox, output_split_sizes=gets, input_split_sizes=sends)

    rates = {name: most * n / _slowest_median(move, iters) / 1e9
             for name, move in (("copy_engines", pushes), ("nccl", nccl))}
    return max(rates.values()), rates


def timed_set(fn, iters, warmup):
    """Median over iterations of the slowest rank's time (us) of fn(fresh) on fresh copies, after `warmup` untimed
    ones (the first prepares; the next ones let PyTorch's pool reach the size the set needs, as a training loop's first
    steps do: until then fresh tensors come from new segments, which one-sided plans map once); and the last result."""
    times, out = [], None
    for _ in range(iters + warmup):
        args = fn.fresh()
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn(args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
        del args
    t = torch.tensor(times[warmup:], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return statistics.median(t.tolist()), out


class Variant:
    def __init__(self, sources, targets, run):
        self.sources, self.targets, self.run = sources, targets, run

    def fresh(self):
        return [DTensor.from_local(x.to_local().clone(), x.device_mesh, x.placements, run_check=False, shape=x.shape,
                                   stride=x.stride()) for x in self.sources]

    def __call__(self, args):
        return self.run(args, self.targets)


def bench_set(name, mesh, world, rank, iters, warmup, gbps):
    params = SETS[name]()
    src_p = [Shard(0)]
    sources, targets, need = [], [], [0] * world
    for i, (_, shape, role) in enumerate(params):
        full = common.make_global(shape, torch.bfloat16, 1000 + i)
        sources.append(DTensor.from_local(common.local_of(full, mesh, src_p, 0, None), mesh, src_p, run_check=False,
                                          shape=full.shape, stride=full.stride()))
        dst = [SERVING[role](len(shape))]
        targets.append(dst)
        for r in range(world):
            need[r] += received_bytes(shape, src_p[0], dst[0], world, r, 2)
        del full
    one_by_one = lambda args, t: [x.redistribute(mesh, p) for x, p in zip(args, t)]  # noqa: E731
    reshard_one = lambda args, t: [rt.redistribute(x, mesh, p) for x, p in zip(args, t)]  # noqa: E731
    many = lambda args, t: rt.redistribute_many(args, t)  # noqa: E731
    row = {"set": name, "tensors": len(params), "mesh": [world],
           "bytes": sum(x.numel() * 2 for x in sources), "max_received_bytes": max(need), "link_gbps": gbps}
    row["bound_us"] = max(need) / (gbps * 1e3)
    results = {}
    for label, fn, transport in [("pytorch", one_by_one, None), ("reshard", reshard_one, "auto"),
                                 ("reshard_nccl", reshard_one, "nccl"), ("reshard_nvlink", reshard_one, "nvlink"),
                                 ("many", many, "auto"), ("many_nccl", many, "nccl")]:
        if transport:
            rt.configure(transport=transport)
        try:
            row[f"{label}_us"], out = timed_set(Variant(sources, targets, fn), iters, warmup)
            results[label] = [o.to_local() for o in out]
        except Exception as e:  # noqa: BLE001 - a variant that fails is reported, the others still run
            row[f"{label}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            if transport:
                rt.configure(transport="auto")
    for label, outs in results.items():
        if label != "pytorch":
            row[f"{label}_equal"] = common.all_ranks_true(
                all(common.same_bits(a, b) for a, b in zip(results["pytorch"], outs)))
    row["beats_bound"] = sorted(k[:-3] for k, v in row.items() if k.endswith("_us") and k != "bound_us"
                                and v < row["bound_us"])
    row["stats"] = rt.stats()
    rt.clear_cache()
    return row


def single_cases(mesh, iters):
    """The issue's single-tensor cases: fresh and reused tensors, PyTorch and reshard (auto, nccl)."""
    rows = []
    for shape in [(4096, 14336), (4096, 4096)]:
        full = common.make_global(shape, torch.bfloat16, 7)
        x = DTensor.from_local(common.local_of(full, mesh, [Shard(0)], 0, None), mesh, [Shard(0)], run_check=False,
                               shape=full.shape, stride=full.stride())
        dst = [Shard(1)]
        row = {"shape": list(shape), "from": "S0", "to": "S1", "dtype": "bf16"}
        for label, fn, transport in [("pytorch", lambda a: a.redistribute(mesh, dst), None),
                                     ("reshard", lambda a: rt.redistribute(a, mesh, dst), "auto"),
                                     ("reshard_nccl", lambda a: rt.redistribute(a, mesh, dst), "nccl")]:
            if transport:
                rt.configure(transport=transport)
            variant = Variant([x], [dst], lambda args, t, fn=fn: [fn(args[0])])
            row[f"{label}_fresh_us"], out = timed_set(variant, iters, 1)
            row[f"{label}_reused_us"] = statistics.median(common.time_call(lambda: fn(x), iters, 3)[0])
            row[f"{label}_equal"] = common.all_ranks_true(common.same_bits(out[0].to_local(),
                                                                           x.redistribute(mesh, dst).to_local()))
            if transport:
                # Host time of one call with the GPU idle (fresh tensors), the median of the slowest rank's.
                host = []
                for _ in range(iters):
                    a = variant.fresh()[0]
                    torch.cuda.synchronize()
                    dist.barrier()
                    t0 = time.perf_counter()
                    rt.redistribute(a, mesh, dst)
                    host.append((time.perf_counter() - t0) * 1e6)
                t = torch.tensor([statistics.median(host)], device="cuda", dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                row[f"{label}_host_us"] = t.item()
                rt.configure(transport="auto")
        rows.append(row)
        rt.clear_cache()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=4, help="untimed calls of each variant of a set first")
    ap.add_argument("--no-single", action="store_true")
    args = ap.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    for s in sets:
        if s not in SETS:
            raise SystemExit(f"--sets: unknown set {s!r} (known: {', '.join(SETS)})")
    rank, world = common.setup()
    mesh = init_device_mesh("cuda", (world,))
    gbps, ways = link_gbps(world, rank)
    report = {"world": world, "device": torch.cuda.get_device_name(), "link_gbps": gbps, "link_ways_gbps": ways,
              "sets": [], "single": []}
    if rank == 0:
        print(f"# {world}x {report['device']}, receive bandwidth per GPU {gbps:.1f} GB/s ({ways})", flush=True)
    for s in sets:
        row = bench_set(s, mesh, world, rank, args.iters, args.warmup, gbps)
        report["sets"].append(row)
        if rank == 0:
            print(json.dumps({k: v for k, v in row.items() if k != "stats"}), flush=True)
    if not args.no_single:
        report["single"] = single_cases(mesh, max(10, args.iters))
        if rank == 0:
            for r in report["single"]:
                print(json.dumps(r), flush=True)
    if rank == 0:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "model_sync.json").write_text(json.dumps(report, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
