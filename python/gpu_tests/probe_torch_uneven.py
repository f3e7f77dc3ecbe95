"""One-off: does PyTorch's DTensor alone stall on (3,5,7) S1<->S0 over 4 ranks (empty shards on rank 3)?"""
import sys, time, os
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, Replicate, distribute_tensor
rank = int(os.environ["RANK"]); torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (dist.get_world_size(),))
v = sys.argv[1]
full = torch.arange(105, dtype=torch.float32, device="cuda").reshape(3, 5, 7)
def say(*x): print(f"[{v} rank {rank}]", *x, flush=True)
if v == "backward":
    x = distribute_tensor(full, mesh, [Shard(1)]).detach().requires_grad_(True)
    o = x.redistribute(mesh, [Shard(0)])
    o.to_local().sum().backward()
    say("backward returned"); torch.cuda.synchronize(); say("synced", x.grad.placements, tuple(x.grad.to_local().shape))
elif v.startswith("many"):
    dts = {"many": [torch.float32, torch.bfloat16, torch.float32], "many_f32": [torch.float32] * 3,
           "many_bf16": [torch.bfloat16]}[v]
    xs = [distribute_tensor(full.to(dt), mesh, [Shard(1)]).detach().requires_grad_(True) for dt in dts]
    outs = [x.redistribute(mesh, [Shard(0)]) for x in xs]
    torch.cuda.synchronize(); say("forward synced")
    sum(o.to_local().float().sum() * (k + 1) for k, o in enumerate(outs)).backward()
    say("backward returned", [(None if x.grad is None else (x.grad.placements, tuple(x.grad.to_local().shape))) for x in xs])
    torch.cuda.synchronize(); say("synced")
elif v in ("expanded", "contiguous"):
    d = distribute_tensor(full, mesh, [Shard(0)])
    loc = d.to_local()
    loc = torch.ones((), device="cuda").expand(loc.shape) if v == "expanded" else torch.ones_like(loc)
    g = DTensor.from_local(loc, mesh, [Shard(0)], run_check=False, shape=full.shape, stride=full.stride())
    y = g.redistribute(mesh, [Shard(1)]); torch.cuda.synchronize(); say("synced S0->S1", tuple(y.to_local().shape))
    y = g.redistribute(mesh, [Replicate()]); torch.cuda.synchronize(); say("synced S0->R", tuple(y.to_local().shape))
dist.barrier(); dist.destroy_process_group()
