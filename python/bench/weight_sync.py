"""Weight sync between meshes: a model's parameters moved from the training job's layout to the serving engine's, into
the engine's own tensors, as an RL loop does every step; bf16 kept or cast to fp8 e4m3 on the way.

    torchrun --nproc-per-node 4 python/bench/weight_sync.py --out DIR [--sets llama3_8b] [--cases NAMES] [--iters 5]

Cases (by world size): 4 GPUs: FSDP2 Shard(0) on ranks 0,1 -> tensor parallel on ranks 2,3; FSDP x TP on (2,2) ->
tensor parallel on ranks 2,3; the same four ranks, FSDP x TP on (2,2) -> tensor parallel on (4). 2 GPUs: the whole
model on rank 0 -> rank 1; FSDP2 on (2) -> tensor parallel on the same ranks viewed as (1,2). Serving placements are
model_sync.py's (colwise Shard(0), rowwise Shard(1), norms Replicate).
Variants, in the same run: reshard.torch.move_state_dict into the serving DTensors (bf16 -> bf16; bf16 -> fp8 e4m3 into
fp8 ones; and block-scaled fp8, 128 x 128 blocks, for every 2-D weight whose serving part holds whole blocks, the
others cast, the scales into the engine's own scale tensors); full_tensor + distribute_tensor per tensor (the training
ranks gather, the first of them broadcasts the full tensor over the world where the serving mesh is another,
distribute_tensor scatters it on the serving mesh);
broadcast from one training rank (the training ranks gather, the first broadcasts, each serving rank keeps its part:
checkpoint-engine's method). The sources stay the same tensors every call (a trainer updates its parameters in place).
Timed: the slowest rank's CUDA-event time of the whole set after a barrier, median of --iters after --warmup calls.
The bound: the most bytes a serving rank must receive from other ranks (its parts minus what its own source holds),
over the receive bandwidth of the case's pattern measured in the same run (model_sync.link_gbps: every training rank
sending to every other serving rank at once, the faster of copy engines and NCCL); a variant faster than its bound is
flagged ("beats_bound").
Checks: every serving rank's every tensor of every variant equal, bit for bit, to its part of the global tensor
(fp8: to its .to(torch.float8_e4m3fn); block-scaled: codes and scales to PyTorch's computation of the rule on it,
check_block_scaled.reference); torch.cuda.memory_allocated unchanged over a call into existing tensors. --variants
picks variants (a diagnosis without the slow baselines; each is checked on its own).
Results: DIR/weight_sync.json and one JSON line per case on stdout; rank 0 names each variant as it starts.
Stalls: reshard's communicators give up after --timeout-s; one-sided steps' stream-ordered waits are bounded only
where reshard itself waits for the work, which --wait-groups makes it do after every group of every move (a stall
then raises naming the pending waits; times include those host waits).
"""

import argparse
import json
import pathlib
import statistics
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
import common  # noqa: E402
import model_sync  # noqa: E402
import reshard  # noqa: E402
import reshard.torch as rt  # noqa: E402
from check_block_scaled import reference as block_reference  # noqa: E402
from reshard import _sync_request as rules  # noqa: E402
from reshard.torch import _sync  # noqa: E402

FP8 = torch.float8_e4m3fn
BLOCK = 128
VARIANTS = ("full_distribute", "broadcast", "reshard", "reshard_fp8", "reshard_fp8_blocks")


def cases(world):
    """(name, source mesh shape, source ranks, target mesh shape, target ranks)."""
    if world >= 4:
        return [("fsdp01_to_tp23", (2,), [0, 1], (2,), [2, 3]),
                ("fsdp_tp_2x2_to_tp23", (2, 2), [0, 1, 2, 3], (2,), [2, 3]),
                ("fsdp_tp_2x2_to_tp4", (2, 2), [0, 1, 2, 3], (4,), [0, 1, 2, 3])]
    return [("rank0_to_rank1", (1,), [0], (1,), [1]), ("fsdp2_to_tp_1x2", (2,), [0, 1], (1, 2), [0, 1])]


def training(role, ndim, mesh_ndim):
    """FSDP2 Shard(0) on the first mesh dim; on a 2-D mesh tensor parallel (the serving rule) on the second."""
    tp = model_sync.SERVING[role](ndim)
    return [Shard(0)] if mesh_ndim == 1 else [Shard(0), tp]


def serving(role, ndim, mesh_ndim):
    return [Replicate()] * (mesh_ndim - 1) + [model_sync.SERVING[role](ndim)]


def box(mesh_shape, ranks, placements, shape, rank):
    """(offset, local shape) of `rank` in a layout, or None outside its mesh."""
    if rank not in ranks:
        return None
    text = [reshard._args.placement_text(p) for p in placements]
    e = reshard.layout(list(mesh_shape), text, list(shape))["ranks"][ranks.index(rank)]
    return e["global_offset"], e["local_shape"]


def part(full, b):
    return full[tuple(slice(o, o + s) for o, s in zip(*b))]


def received(shape, src_box, dst_box, es):
    """Bytes of dst_box that src_box (this rank's own source) does not hold."""
    if dst_box is None:
        return 0
    need = held = 1
    for d in range(len(shape)):
        a, n = dst_box[0][d], dst_box[1][d]
        need *= n
        if src_box is not None:
            c, m = src_box[0][d], src_box[1][d]
            held *= max(0, min(a + n, c + m) - max(a, c))
    return (need - (held if src_box is not None else 0)) * es


def timed(fn, iters, warmup):
    """Median over iterations of the slowest rank's time (us) of fn(); fn's last result."""
    out, times = None, []
    for i in range(iters + warmup):
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) * 1000.0)
    t = torch.tensor(times, device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return statistics.median(t.tolist()), out


def bench_case(case, set_name, world, me, iters, warmup, wait_groups=False, variants=VARIANTS):
    name, sshape, sranks, tshape, tranks = case
    # The probe needs a GPU per rank (ranks sharing a GPU, as scripts/device/one_gpu.sh runs them, have no bound).
    gbps, ways = (model_sync.link_gbps(world, me, senders=sranks, receivers=tranks)
                  if torch.cuda.device_count() >= world else (None, {}))
    smesh = DeviceMesh("cuda", torch.tensor(sranks).reshape(sshape))
    tmesh = DeviceMesh("cuda", torch.tensor(tranks).reshape(tshape))
    sources, tplace, need, reference = {}, {}, [0] * world, {}
    for i, (key, shape, role) in enumerate(model_sync.SETS[set_name]()):
        full = common.make_global(shape, torch.bfloat16, 1000 + i)
        sp = training(role, len(shape), len(sshape))
        tplace[key] = serving(role, len(shape), len(tshape))
        b = box(sshape, sranks, sp, shape, me)
        local = part(full, b).contiguous() if b is not None else full.new_empty(0)
        sources[key] = DTensor.from_local(local, smesh, sp, run_check=False, shape=full.shape, stride=full.stride())
        tb = box(tshape, tranks, tplace[key], shape, me)
        if tb is not None:  # what this serving rank must end up with: its part of the global tensor
            reference[key] = part(full, tb).clone()
        for r in range(world):
            need[r] += received(shape, box(sshape, sranks, sp, shape, r), box(tshape, tranks, tplace[key], shape, r), 2)
        del full
    row = {"case": name, "set": set_name, "tensors": len(sources), "from": [list(sshape), sranks],
           "to": [list(tshape), tranks], "bytes": sum(x.numel() * 2 for x in sources.values()),
           "max_received_bytes": max(need), "link_gbps": gbps, "link_ways_gbps": ways,
           "bound_us": max(need) / (gbps * 1e3) if gbps else None}
    first, same_world = sranks[0], set(sranks) == set(tranks)

    def gathered(x):
        full = x.full_tensor() if me in sranks else torch.empty(x.shape, dtype=x.dtype, device="cuda")
        if not same_world:
            dist.broadcast(full, src=first)
        return full

    def full_and_distribute():  # distribute_tensor on the serving mesh's ranks only (a collective of that mesh)
        out = {}
        for k, x in sources.items():
            full = gathered(x)
            if me in tranks:
                out[k] = distribute_tensor(full, tmesh, tplace[k])
        return out

    def broadcast_from_one():
        out = {}
        for k, x in sources.items():
            full = x.full_tensor() if me in sranks else torch.empty(x.shape, dtype=x.dtype, device="cuda")
            dist.broadcast(full, src=first)
            b = box(tshape, tranks, tplace[k], x.shape, me)
            if b is not None:
                out[k] = part(full, b).clone()
        return out

    for label, fn in (("full_distribute", full_and_distribute), ("broadcast", broadcast_from_one)):
        if label not in variants:
            continue
        common.log(f"# {name}: {label}")
        row[f"{label}_us"], out = timed(fn, iters, 1)
        good = all(common.same_bits(out[k].to_local() if isinstance(out[k], DTensor) else out[k], reference[k])
                   for k in reference)
        row[f"{label}_equal"] = common.all_ranks_true(good)
        del out
    # Block-scaled: every 2-D weight whose serving layout holds whole 128 x 128 blocks (the others are cast).
    blocks = {k: BLOCK for k, x in sources.items()
              if x.ndim == 2 and not rules.block_misalignment(_sync._side(k, "target", tmesh, tplace[k], 2, world),
                                                              tuple(x.shape), BLOCK)}
    row["block_scaled_tensors"] = len(blocks)
    for label, dtype, scaled in (("reshard", None, None), ("reshard_fp8", FP8, None),
                                 ("reshard_fp8_blocks", FP8, blocks)):
        if label not in variants:
            continue
        common.log(f"# {name}: {label}")
        targets = {k: (tmesh, tplace[k]) for k in sources}
        # A progress callback makes each group wait with reshard's timeout: a stall raises, naming the pending waits.
        watch = {"progress": lambda _: None} if wait_groups else {}
        dests = rt.move_state_dict(sources, targets, dtype=dtype, block_scales=scaled, **watch)  # the engine's tensors
        into = {k: dests[k] for k in sources} if me in tranks else targets
        kw = {"dtype": dtype} if me not in tranks else {}
        kw["block_scales"] = scaled
        kw.update(watch)
        if scaled and me in tranks:
            kw["scales"] = {k: dests[k + _sync.SCALE_SUFFIX] for k in scaled}
        row[f"{label}_us"], _ = timed(lambda into=into, kw=kw: rt.move_state_dict(sources, into, **kw), iters, warmup)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        rt.move_state_dict(sources, into, **kw)
        torch.cuda.synchronize()
        row[f"{label}_allocates_nothing"] = common.all_ranks_true(torch.cuda.memory_allocated() == before)
        good = True
        for k in reference:
            if scaled and k in scaled:  # the serving rank holds whole blocks: its part quantizes as the global tensor
                codes, scale_inv = block_reference(reference[k], dtype, BLOCK)
                good = good and common.same_bits(dests[k + _sync.SCALE_SUFFIX].to_local(), scale_inv)
            else:
                codes = reference[k] if dtype is None else reference[k].to(dtype)
            good = good and common.same_bits(dests[k].to_local(), codes)
        row[f"{label}_equal"] = common.all_ranks_true(good)
        del dests, into, kw
    row["beats_bound"] = sorted(k[:-3] for k, v in row.items() if k.endswith("_us") and k != "bound_us"
                                and row["bound_us"] and v < row["bound_us"])
    row["stats"] = rt.stats()
    rt.clear_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sets", default="llama3_8b")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cases", default="", help="names of the cases to run (default: every case of the world size)")
    ap.add_argument("--timeout-s", type=float, default=120.0, help="reshard.torch.configure(timeout_s=...)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="variants to run (checks need none of the others)")
    ap.add_argument("--wait-groups", action="store_true",
                    help="wait for each group of a move with reshard's timeout (a diagnosis: times include the waits)")
    args = ap.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    for s in sets:
        if s not in model_sync.SETS:
            raise SystemExit(f"--sets: unknown set {s!r} (known: {', '.join(model_sync.SETS)})")
    variants = tuple(v for v in args.variants.split(",") if v)
    if set(variants) - set(VARIANTS):
        raise SystemExit(f"--variants: unknown {sorted(set(variants) - set(VARIANTS))} (known: {', '.join(VARIANTS)})")
    me, world = common.setup()
    rt.configure(timeout_s=args.timeout_s)
    chosen = [c for c in cases(world) if not args.cases or c[0] in args.cases.split(",")]
    unknown = set(filter(None, args.cases.split(","))) - {c[0] for c in cases(world)}
    if unknown:
        raise SystemExit(f"--cases: unknown for {world} ranks: {', '.join(sorted(unknown))}")
    report = {"world": world, "device": torch.cuda.get_device_name(), "rows": [], "versions": common.versions()}
    common.log(f"# {world}x {report['device']}")
    for s in sets:
        for case in chosen:
            row = bench_case(case, s, world, me, args.iters, args.warmup, args.wait_groups, variants)
            report["rows"].append(row)
            common.log(json.dumps({k: v for k, v in row.items() if k != "stats"}))
    common.write_json(args.out, "weight_sync.json", report)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
