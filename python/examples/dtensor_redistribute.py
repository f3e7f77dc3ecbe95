"""Redistributing a DTensor with reshard.

    torchrun --nproc-per-node 2 python/examples/dtensor_redistribute.py

Shows the three ways in: reshard.torch.redistribute (DTensor.redistribute's signature, differentiable), enable() (every
DTensor redistribution of the process, DTensor.redistribute included), and reshard.plan (what will move, without a
GPU).
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import reshard
import reshard.torch as rt


def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    mesh = init_device_mesh("cuda", (world,))
    rank = dist.get_rank()

    full = torch.arange(8 * 6, dtype=torch.float32, device="cuda").reshape(8, 6)
    x = distribute_tensor(full, mesh, [Shard(0)]).requires_grad_()

    # 1. Explicitly, as x.redistribute(mesh, [Shard(1)]).
    y = rt.redistribute(x, mesh, [Shard(1)])
    assert torch.equal(y.to_local(), x.redistribute(mesh, [Shard(1)]).to_local())
    y.to_local().sum().backward()  # the gradient comes back Shard(0), through reshard
    print(f"rank {rank}: x local {tuple(x.to_local().shape)} -> y local {tuple(y.to_local().shape)}, "
          f"x.grad placements {x.grad.placements}")

    # 2. Everything DTensor redistributes, while enabled (here: full_tensor's all-gather and an explicit call).
    with rt.enabled():
        z = x.redistribute(mesh, [Replicate()])
        assert torch.equal(z.to_local(), full)
        assert torch.equal(y.full_tensor(), full)
    if rank == 0:
        print("reshard.torch.stats():", rt.stats())

    # 3. The plan behind a redistribution, on any machine.
    if rank == 0:
        p = reshard.plan([world], "S0", "S1", [8192, 8192], "f32")
        print(f"plan S0->S1 8192x8192 f32 on {world} GPUs: {p.strategy}, {p.estimated_us:.0f} us estimated, "
              f"{p.bytes_moved} bytes cross between GPUs")
        print(p.table())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
