"""Probe: a 4-rank (2,2) redistribution from a Partial source on one-sided plans, one fresh executor per trial, with
one rank's GPU stream delayed before the call (torch.cuda._sleep), compared with DTensor.redistribute every element.
Prints, per case, fuse mode and delayed rank, how many trials differed on each rank.

    torchrun --nproc-per-node 4 python/tests/gpu/race_probe.py
"""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

import reshard.torch as rt


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    mesh = init_device_mesh("cuda", (2, 2))
    torch.manual_seed(5)
    full = torch.randint(-8, 8, (7, 5), device="cuda").float()
    src = [Partial(), Replicate()]
    cases = {"S0,S0": [Shard(0), Shard(0)], "R,S0": [Replicate(), Shard(0)], "S0,S1": [Shard(0), Shard(1)]}
    for fuse in ("always", "never"):
        rt.configure(fuse=fuse)
        for name, dst in cases.items():
            for delayed in (-1, 0, 1, 2, 3):
                bad = 0
                for trial in range(12):
                    rt.clear_cache()
                    local = full * (rank // 2 + 1)  # a different contribution per mesh-dim-0 coordinate
                    x = DTensor.from_local(local, mesh, src, shape=full.shape, stride=full.stride())
                    ref = x.redistribute(mesh, dst).to_local().clone()
                    torch.cuda.synchronize()
                    dist.barrier()
                    if rank == delayed:
                        torch.cuda._sleep(2_000_000)
                    got = rt.redistribute(x, mesh, dst).to_local()
                    bad += int(not torch.equal(ref, got))
                t = torch.tensor([bad], device="cuda")
                allbad = [torch.zeros_like(t) for _ in range(4)]
                dist.all_gather(allbad, t)
                if rank == 0:
                    print(f"fuse={fuse} P,R->{name} delayed rank {delayed}: trials differing per rank "
                          f"{[int(b.item()) for b in allbad]}", flush=True)
    if rank == 0:
        print(rt.stats(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
