#!/usr/bin/env python3
"""DTensor baseline between meshes: what a DTensor user does today to move a tensor from one mesh to another.

DTensor's `redistribute` works within one mesh only, so the way across is `full = dt.full_tensor()` (every rank of
the source mesh gathers the whole tensor) and then `distribute_tensor(full, target_mesh, target_placements)`. This
script times that pair for the cases `reshard run --from-mesh ... --to-mesh ...` runs (issue 19), so that the two can
be put side by side. Run under torchrun with one process per rank of the world (one GPU each):

    torchrun --nproc-per-node 2 bench/pytorch_cross_mesh.py --out cross_mesh_pytorch_2.csv
    torchrun --nproc-per-node 4 bench/pytorch_cross_mesh.py --out cross_mesh_pytorch_4.csv
    torchrun --nproc-per-node 2 bench/pytorch_cross_mesh.py --device cpu --out /tmp/cross.csv   # gloo: logic check

Cases, in this order of precedence:
  --cases FILE   a JSON list of {"from_mesh": [2], "from_ranks": [0, 1], "to_mesh": [1], "to_ranks": [1],
                 "from": "S0", "to": "R", "shape": [16384, 16384], "dtype": "f32"} (rank lists optional: 0..n-1),
                 as `reshard bench --from-mesh ... --to-mesh ... --cases FILE` writes them;
  --from-mesh 2 [--from-ranks 0,1] --to-mesh 1 [--to-ranks 1] --from S0 --to R [--shapes A,B] [--dtype f32]
                 (the meaning of `reshard run`'s flags; one case per shape);
  the defaults of issue 19 for the world size: 2 ranks: (2) -> (1) on rank 1, S0 -> R; 4 ranks: (2,2) [S0,S1] ->
  (4) [S0] and (4) [S0] -> (2) on ranks 0,1 [S0]; each at 8192x8192 and 16384x16384 f32 (256 MiB and 1 GiB),
  or, with --device cpu, at 64x48 and 7x5.
Placements: R and S<d> (S(<d>), negative d from the end), one per mesh dim, comma-separated. Partial is refused
(distribute_tensor cannot place one). Every rank of the target mesh must be in the source mesh: full_tensor() gives
the tensor to the source mesh's ranks only, and DTensor has no other way across.

Method. Every rank builds every mesh (DeviceMesh construction is collective over the whole world) and the global
tensor (bench/pytorch_baseline.py's generator: small integers, exact in every dtype), then the source DTensor with
distribute_tensor. One call is verified first (on CUDA into memory the caching allocator holds filled with 0xA5, so
that no earlier result can pass for this one), then --warmup untimed calls, then --iters timed calls: before each, a
barrier of the world and the device idle; each call timed on the rank (torch.cuda.Event pair on the current stream,
or time.perf_counter on CPU), with a third mark after full_tensor(). Per iteration the slowest rank's time counts;
median_us and min_us are over iterations, full_tensor_us is the median of the slowest rank's full_tensor() part.
The last timed call is verified too. Verified: every element of every target rank's local shard against the global
tensor at the offsets DTensor's rule gives (torch.chunk sizes along each sharded mesh dim, in mesh-dim order),
computed here independently of DTensor; a rank outside the target mesh must hold nothing (an empty local tensor).
`wrong` counts the elements that differ (a shard of the wrong shape counts whole), over both verified calls; `checked`
the elements compared.

--src-data-rank 0,none (default both, one row each): distribute_tensor's src_data_rank. 0 is PyTorch's default (each
target mesh dim's group rank 0 scatters or broadcasts the tensor); none lets every target rank slice its shard from
its own copy with no communication, which full_tensor() made possible.

Output: rank 0 writes --out, CSV with reshard bench's column names where they apply, each row as it is measured;
comment lines (starting with '#') precede the header, so read it with
csv.DictReader(line for line in f if not line.startswith("#")).
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import distribute_tensor

from pytorch_baseline import DTYPES, full_tensor, placement, wait

COLUMNS = ["mesh", "from", "to", "shape", "dtype", "strategy", "src_data_rank", "tensor_bytes", "median_us", "min_us",
           "full_tensor_us", "algbw_GBps", "wrong", "checked", "backend", "ranks", "iterations"]
PLACEMENT_RE = re.compile(r"^(R|S\(?(-?\d+)\)?)$")
POISON_BYTE = 0xA5


def issue_cases(world, device):
    """Issue 19's cases for a world of `world` ranks."""
    shapes = [[64, 48], [7, 5]] if device == "cpu" else [[8192, 8192], [16384, 16384]]
    if world == 2:
        pairs = [([2], [1], [1], "S0", "R")]
    elif world == 4:
        pairs = [([2, 2], [4], None, "S0,S1", "S0"), ([4], [2], None, "S0", "S0")]
    else:
        return None
    return [{"from_mesh": fm, "to_mesh": tm, "to_ranks": tr, "from": f, "to": t, "shape": s, "dtype": "f32"}
            for fm, tm, tr, f, t in pairs for s in shapes]


def parse_rank_list(flag, text):
    """'0-3,6,7' -> [0, 1, 2, 3, 6, 7] (reshard's rank-list syntax)."""
    ranks = []
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            ranks.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    except ValueError:
        raise ValueError(f"{flag} '{text}': expected ranks and ranges like 0-3,6,7") from None
    return ranks


def parse_extents(flag, text):
    try:
        return [int(x) for x in text.lower().split("x")]
    except ValueError:
        raise ValueError(f"{flag} '{text}': expected extents joined by x, like 2x4") from None


def cases_from_flags(args):
    shapes = [parse_extents("--shapes", s) for s in args.shapes.split(",")] if args.shapes else [[8192, 8192],
                                                                                                [16384, 16384]]
    case = {"from_mesh": parse_extents("--from-mesh", args.from_mesh),
            "to_mesh": parse_extents("--to-mesh", args.to_mesh or args.from_mesh),
            "from": args.src, "to": args.dst, "dtype": args.dtype}
    if args.from_ranks:
        case["from_ranks"] = parse_rank_list("--from-ranks", args.from_ranks)
    if args.to_ranks:
        case["to_ranks"] = parse_rank_list("--to-ranks", args.to_ranks)
    return [dict(case, shape=s) for s in shapes]


def check_placements(text, mesh_ndim, tensor_ndim, what):
    """The placement texts of one side, checked; raises ValueError naming the problem."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != mesh_ndim:
        raise ValueError(f"{what} placements '{text}' name {len(parts)} mesh dims; the mesh has {mesh_ndim}")
    for p in parts:
        m = PLACEMENT_RE.match(p)
        if not m:
            raise ValueError(f"{what} placement '{p}': expected R or S<d> (distribute_tensor cannot place a Partial)")
        if m.group(2) is not None and not -tensor_ndim <= int(m.group(2)) < tensor_ndim:
            raise ValueError(f"{what} placement '{p}': the tensor has {tensor_ndim} dims")
    return parts


def check_case(case, world):
    """A case from the spec, with defaults filled and every field checked; raises ValueError naming the problem."""
    if not isinstance(case, dict):
        raise ValueError(f"expected an object, got {json.dumps(case)}")
    missing = [k for k in ("from_mesh", "from", "to", "shape") if k not in case]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)} (to_mesh defaults to from_mesh; ranks to 0..n-1)")
    c = dict(case)
    c.setdefault("to_mesh", c["from_mesh"])
    for side in ("from", "to"):
        c[side] = ",".join(c[side]) if isinstance(c[side], list) else str(c[side])
    shape = [int(x) for x in c["shape"]]
    if not shape or min(shape) < 1:
        raise ValueError(f"shape {shape}: every extent must be >= 1")
    if c.get("dtype", "f32") not in DTYPES:
        raise ValueError(f"dtype '{c.get('dtype')}': expected one of {', '.join(DTYPES)}")
    c["dtype"], c["shape"] = c.get("dtype", "f32"), shape
    for side in ("from", "to"):
        mesh = [int(x) for x in c[f"{side}_mesh"]]
        if not mesh or min(mesh) < 1:
            raise ValueError(f"{side}_mesh {mesh}: every extent must be >= 1")
        ranks = [int(r) for r in c.get(f"{side}_ranks") or range(math.prod(mesh))]
        if len(ranks) != math.prod(mesh):
            raise ValueError(f"{side}_ranks {ranks}: {len(ranks)} ranks for a mesh of {math.prod(mesh)}")
        if len(set(ranks)) != len(ranks) or min(ranks) < 0 or max(ranks) >= world:
            raise ValueError(f"{side}_ranks {ranks}: ranks must be distinct and in 0..{world - 1} (the world)")
        c[f"{side}_mesh"], c[f"{side}_ranks"] = mesh, ranks
        c[f"{side}_placements"] = check_placements(c[side], len(mesh), len(shape), side)
    outside = sorted(set(c["to_ranks"]) - set(c["from_ranks"]))
    if outside:
        raise ValueError(f"target ranks {outside} are not in the source mesh: full_tensor() gives them nothing, "
                         "so full_tensor() + distribute_tensor cannot reach them")
    return c


def mesh_str(shape, ranks, world):
    """reshard's Mesh::str(): '2x2', '2x2[3,2,1,0]', '1[1]/2', '2[0,1]/4' (the rank list whenever the mesh is not
    the whole world in order)."""
    s = "x".join(str(d) for d in shape)
    if ranks != list(range(len(ranks))) or world != len(ranks):
        s += "[" + ",".join(str(r) for r in ranks) + "]"
    return s + (f"/{world}" if world != len(ranks) else "")


def coordinate(shape, ranks, rank):
    """The row-major mesh coordinate of `rank`, or None when the mesh does not hold it."""
    if rank not in ranks:
        return None
    i, coord = ranks.index(rank), []
    for d in reversed(shape):
        coord.append(i % d)
        i //= d
    return coord[::-1]


def local_box(shape, mesh_shape, coord, placements):
    """(offset, length) per tensor dim of the shard at `coord`: DTensor's rule, each Shard(d) mesh dim in order
    cutting the current extent of d into torch.chunk pieces (ceil(n / k) long, the last ones short or empty)."""
    offsets, lengths = [0] * len(shape), list(shape)
    for m, p in enumerate(placements):
        if p == "R":
            continue
        d = int(p[1:].strip("()")) % len(shape)
        chunk = -(-lengths[d] // mesh_shape[m])
        start = min(coord[m] * chunk, lengths[d])
        offsets[d] += start
        lengths[d] = min(chunk, lengths[d] - start)
    return offsets, lengths


def count_wrong(local, full, case, rank):
    """(wrong, checked) for this rank's local shard of the target against the global tensor."""
    coord = coordinate(case["to_mesh"], case["to_ranks"], rank)
    if coord is None:  # outside the target mesh: must hold nothing
        return local.numel(), 0
    offsets, lengths = local_box(case["shape"], case["to_mesh"], coord, case["to_placements"])
    expected = full[tuple(slice(o, o + n) for o, n in zip(offsets, lengths))]
    if list(local.shape) != lengths:
        return max(local.numel(), expected.numel()), expected.numel()
    return int((local != expected).sum().item()), expected.numel()


class Clock:
    """Marks on the device's timeline: CUDA events on the current stream, or the host clock on CPU."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def us(self, a, b):
        return a.elapsed_time(b) * 1e3 if self.cuda else (b - a) * 1e6


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def barrier(device):
    sync(device)
    if device == "cuda":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()
    sync(device)


def across_call(dt, dst_mesh, dst_placements, src_data_rank, clock):
    """full_tensor() then distribute_tensor on the target mesh: (target local tensor, start, after full, end)."""
    t0 = clock.mark()
    full = wait(dt.full_tensor())
    t1 = clock.mark()
    out = distribute_tensor(full, dst_mesh, dst_placements, src_data_rank=src_data_rank).to_local()
    t2 = clock.mark()
    return wait(out), t0, t1, t2


def run_case(case, meshes, src_data_rank, args, device):
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[case["dtype"]]
    full = full_tensor(case["shape"], dtype, device=device)
    src_mesh, dst_mesh = meshes[case["from_key"]], meshes[case["to_key"]]
    src_pl = [placement(p) for p in case["from_placements"]]
    dst_pl = [placement(p) for p in case["to_placements"]]
    # Ranks in neither mesh take no part: DTensor's calls do nothing there (no group of theirs communicates).
    member = rank in case["from_ranks"]
    dt = distribute_tensor(full, src_mesh, src_pl) if member else None
    clock = Clock(device)
    tensor_bytes = full.numel() * full.element_size()
    wrong = checked = 0

    def call():
        if not member:
            mark = clock.mark()
            return full.new_empty(0), mark, mark, mark
        return across_call(dt, dst_mesh, dst_pl, src_data_rank, clock)

    if device == "cuda":  # hand the first call memory that holds no earlier result
        sync(device)
        torch.cuda.empty_cache()
        torch.full((2 * tensor_bytes,), POISON_BYTE, dtype=torch.uint8, device=device)  # freed at once, kept cached
    barrier(device)
    out = call()[0]
    sync(device)
    w, c = count_wrong(out, full, case, rank)
    wrong, checked = wrong + w, checked + c
    del out
    for _ in range(args.warmup):
        call()
    samples = []
    for _ in range(args.iters):
        barrier(device)
        out, t0, t1, t2 = call()
        sync(device)
        samples.append((clock.us(t0, t2), clock.us(t0, t1)))
    w, c = count_wrong(out, full, case, rank)
    wrong, checked = wrong + w, checked + c
    del out, dt
    times = torch.tensor([t for s in samples for t in s], dtype=torch.float64, device=device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    counts = torch.tensor([wrong, checked], dtype=torch.int64, device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    total, part = times[0::2].tolist(), times[1::2].tolist()
    median = statistics.median(total)
    mesh = mesh_str(case["from_mesh"], case["from_ranks"], world) + "->" + mesh_str(case["to_mesh"],
                                                                                    case["to_ranks"], world)
    return {"mesh": mesh, "from": ",".join(case["from_placements"]), "to": ",".join(case["to_placements"]),
            "shape": "x".join(str(s) for s in case["shape"]), "dtype": case["dtype"], "strategy": "pytorch",
            "src_data_rank": "none" if src_data_rank is None else src_data_rank, "tensor_bytes": tensor_bytes,
            "median_us": round(median, 3), "min_us": round(min(total), 3),
            "full_tensor_us": round(statistics.median(part), 3),
            "algbw_GBps": round(tensor_bytes / median / 1e3, 3) if median > 0 else "",
            "wrong": int(counts[0].item()), "checked": int(counts[1].item()),
            "backend": dist.get_backend(), "ranks": world, "iterations": args.iters}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV file rank 0 writes")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cuda (nccl) or cpu (gloo)")
    ap.add_argument("--cases", help="JSON list of cases (see the module's help)")
    ap.add_argument("--from-mesh", help="one case from flags: source mesh shape, e.g. 2x2")
    ap.add_argument("--from-ranks", help="source mesh's world ranks, e.g. 0-3 (default 0..n-1)")
    ap.add_argument("--to-mesh", help="target mesh shape (default --from-mesh)")
    ap.add_argument("--to-ranks", help="target mesh's world ranks (default 0..n-1)")
    ap.add_argument("--from", dest="src", help="source placements, e.g. S0,S1")
    ap.add_argument("--to", dest="dst", help="target placements, e.g. S0")
    ap.add_argument("--shapes", help="global shapes, e.g. 8192x8192,16384x16384")
    ap.add_argument("--dtype", default="f32", help=f"one of {', '.join(DTYPES)}")
    ap.add_argument("--src-data-rank", default="0,none", help="distribute_tensor's src_data_rank values: 0, none")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    return ap, ap.parse_args()


def load_cases(ap, args, world):
    """The checked cases, or argparse's exit 2 naming the problem (identical on every rank: nothing hangs)."""
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    try:
        values = [v.strip() for v in args.src_data_rank.split(",")]
        if not values or any(v not in ("0", "none") for v in values):
            raise ValueError(f"--src-data-rank '{args.src_data_rank}': expected 0, none or 0,none")
        src_data_ranks = [None if v == "none" else 0 for v in values]
        if args.cases:
            if args.from_mesh or args.to_mesh:
                raise ValueError("--cases and --from-mesh/--to-mesh name cases twice; give one of them")
            try:
                with open(args.cases) as f:
                    cases = json.load(f)
            except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
                raise ValueError(f"--cases '{args.cases}': {e}") from None
        elif args.from_mesh:
            if not (args.src and args.dst):
                raise ValueError("--from-mesh needs --from and --to")
            cases = cases_from_flags(args)
        else:
            cases = issue_cases(world, args.device)
            if cases is None:
                raise ValueError(f"no default cases for {world} ranks (2 or 4); give --cases or --from-mesh")
        if not isinstance(cases, list) or not cases:
            raise ValueError(f"--cases '{args.cases}': expected a non-empty JSON list of cases")
        checked = []
        for i, c in enumerate(cases):
            try:
                checked.append(check_case(c, world))
            except (ValueError, TypeError) as e:
                raise ValueError(f"case {i}: {e}") from None
        return checked, src_data_ranks
    except ValueError as e:
        ap.error(str(e))


def main():
    ap, args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cases, src_data_ranks = load_cases(ap, args, world)
    out = None
    if int(os.environ.get("RANK", "0")) == 0:  # the output is checked before any work (torchrun stops the others)
        try:
            out = open(args.out, "w", newline="")
        except OSError as e:
            ap.error(f"--out '{args.out}': {e.strerror}")
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    # No device_id: DeviceMesh then makes its groups with new_group, which every rank of the world joins (a rank
    # outside a mesh included), as DTensor's own tests do.
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank = dist.get_rank()
    meshes = {}  # every rank builds every mesh, in the same order (collective over the world)
    for c in cases:
        for side in ("from", "to"):
            key = (tuple(c[f"{side}_mesh"]), tuple(c[f"{side}_ranks"]))
            c[f"{side}_key"] = key
            if key not in meshes:
                meshes[key] = DeviceMesh(args.device, torch.tensor(c[f"{side}_ranks"]).reshape(key[0]))
    if out:
        out.write(f"# bench/pytorch_cross_mesh.py: full_tensor() then distribute_tensor on the target mesh; torch "
                  f"{torch.__version__}, {world} ranks, {args.device}, {args.iters} timed iterations after "
                  f"{args.warmup} warm-up (slowest rank per iteration; median and min)\n"
                  "# algbw_GBps = tensor_bytes / median_us / 1e3 (tensor bytes / time, decimal GB/s)\n")
        writer = csv.DictWriter(out, COLUMNS)
        writer.writeheader()
        out.flush()
    failed = False
    for c in cases:
        for sdr in src_data_ranks:
            row = run_case(c, meshes, sdr, args, args.device)
            failed |= row["wrong"] > 0
            if out:
                writer.writerow(row)
                out.flush()
                print(f"pytorch {row['mesh']} {row['from']} -> {row['to']} {row['shape']} {row['dtype']} "
                      f"src_data_rank={row['src_data_rank']}: median {row['median_us']:.1f} us (full_tensor "
                      f"{row['full_tensor_us']:.1f}), min {row['min_us']:.1f} us, {row['algbw_GBps']} GB/s, "
                      f"wrong {row['wrong']} of {row['checked']}", flush=True)
    if out:
        out.close()
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
