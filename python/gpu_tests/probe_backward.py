"""One-off: which part of check_fresh_buffers' redistribute_many backward stalls on 4 processes."""
import argparse, json, os, pathlib, sys, time
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa
import check_fresh_buffers as cf  # noqa
import reshard.torch as rt  # noqa

ap = argparse.ArgumentParser()
ap.add_argument("--setting", default="auto")
ap.add_argument("--shapes", default="0,1,2,3")
ap.add_argument("--pairs", default="0,1,2,3,4,5,6")
ap.add_argument("--bwd", default="")
ap.add_argument("--single", action="store_true", help="gradients moved with rt.redistribute one by one, no autograd")
a = ap.parse_args()
rank, world = common.setup()
mesh = init_device_mesh("cuda", (world,))
cf.SHAPES = [cf.SHAPES[int(i)] for i in a.shapes.split(",")]
cf.PAIRS = [cf.PAIRS[int(i)] for i in a.pairs.split(",")]
if a.setting == "nvlink":
    profile = json.loads((pathlib.Path(__file__).resolve().parents[2] / "bench/profiles/h100x2.json").read_text())
    profile["nvlink"]["map_us"] = 0
    p = pathlib.Path(f"/tmp/probe_mf_{rank}.json"); p.write_text(json.dumps(profile))
    rt.configure(transport="nvlink", profile=str(p))
elif a.setting == "nccl":
    rt.configure(transport="nccl")
def say(*x):
    print(f"[rank {rank} {time.time():.3f}]", *x, file=sys.stderr, flush=True)
checks = cf.Checks()
if a.single:
    xs, targets = [], []
    seed = 500
    for i, (src, dst) in enumerate(cf.PAIRS * 3):
        shape = cf.SHAPES[i % len(cf.SHAPES)]
        if src[0] == "S" and int(src[1:]) >= len(shape) or dst[0] == "S" and int(dst[1:]) >= len(shape):
            continue
        seed += 1
        xs.append(cf.dtensor(mesh, shape, cf.DTYPES[i % 2], src, seed)); targets.append([common.placement(dst)])
    for j, (x, t) in enumerate(zip(xs, targets)):
        y = rt.redistribute(x, mesh, t)
        g = y.detach()
        say("member", j, x.placements, "->", t, tuple(x.shape), x.dtype, "local", tuple(x.to_local().shape))
        back = rt.redistribute(cf.fresh(g), mesh, [common.placement("R")] if str(x.placements[0]).startswith("P") else list(x.placements))
        torch.cuda.synchronize(); say("member", j, "synced")
elif a.bwd:
    xs, targets = [], []
    seed = 500
    for i, (src, dst) in enumerate(cf.PAIRS * 3):
        shape = cf.SHAPES[i % len(cf.SHAPES)]
        if src[0] == "S" and int(src[1:]) >= len(shape) or dst[0] == "S" and int(dst[1:]) >= len(shape):
            continue
        seed += 1
        xs.append(cf.dtensor(mesh, shape, cf.DTYPES[i % 2], src, seed)); targets.append([common.placement(dst)])
    leaves = [cf.fresh(x).detach().requires_grad_(True) for x in xs]
    if a.bwd == "ours":
        outs = rt.redistribute_many(leaves, targets)
    elif a.bwd == "oursingle":
        outs = [rt.redistribute(x, mesh, t) for x, t in zip(leaves, targets)]
    else:
        outs = [x.redistribute(mesh, t) for x, t in zip(leaves, targets)]
    torch.cuda.synchronize(); say("forward synced", [tuple(o.to_local().shape) for o in outs])
    sum(o.to_local().float().sum() * (k + 1) for k, o in enumerate(outs)).backward()
    say("backward returned")
    torch.cuda.synchronize(); say("backward synced")
    for j, x in enumerate(leaves):
        say("grad", j, x.placements, tuple(x.to_local().shape), None if x.grad is None else (x.grad.placements, tuple(x.grad.to_local().shape), x.grad.to_local().stride()))
else:
    say("many_calls start")
    cf.many_calls(mesh, checks)
    say("many_calls returned", checks.passed, checks.failed)
torch.cuda.synchronize()
say("synced")
dist.barrier()
if rank == 0:
    print(f"RESULT {a} passed {checks.passed} failed {checks.failed}", flush=True)
dist.destroy_process_group()
