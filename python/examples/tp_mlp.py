"""A tensor-parallel MLP block trained a few steps, with PyTorch's redistributions and with reshard's.

    torchrun --nproc-per-node 2 python/examples/tp_mlp.py [--steps 5] [--compile]

The block is Megatron-style tensor + sequence parallelism with parallelize_module: the LayerNorm runs on sequence
shards (SequenceParallel), the first Linear is ColwiseParallel (its input all-gathered from the sequence shards), the
second RowwiseParallel (its partial output reduce-scattered back to sequence shards). Every redistribution DTensor does
here (in parallelize_module's layouts, inside operators, in the backward pass and in the optimizer) goes through
reshard after reshard.torch.enable(). On 2 ranks the losses are the same bits as with PyTorch. On more, a Partial sum
of floats is added in another order than NCCL's ring (rank order; docs/python.md, "Numerics"), so the last bits of a
loss may differ: the example prints each step's difference in ulps and passes when it is within 2(n - 1)(k + 2) ulps
at step k on n ranks (exit 1 beyond it).
"""

import argparse
import os
import struct

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.w2(torch.relu(self.w1(self.norm(x))))


def build(mesh, dim=1024, hidden=4096, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    model = Block(dim, hidden).to(device="cuda", dtype=dtype)
    plan = {
        "norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
    }
    return parallelize_module(model, mesh, plan)


def batch(step, batch_size, seq, dim, dtype=torch.float32):
    """This rank's sequence shard of step `step`'s input (the global batch is the same on every rank)."""
    g = torch.Generator(device="cuda")
    g.manual_seed(1000 + step)
    full = torch.randn(batch_size, seq, dim, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    return full.chunk(dist.get_world_size(), dim=1)[dist.get_rank()].contiguous()


def train(model, steps, batch_size=8, seq=1024, dim=1024, lr=1e-2, dtype=torch.float32, record=None, step_fn=None):
    """SGD steps on this rank's sequence shard; returns the local losses. record(step, loss, model) is called after
    backward, before the optimizer step (to look at gradients)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    forward = model if step_fn is None else step_fn  # (a compiled module has no truth value)
    losses = []
    for step in range(steps):
        x = batch(step, batch_size, seq, dim, dtype)
        out = forward(x)
        loss = out.float().pow(2).mean()
        loss.backward()
        if record is not None:
            record(step, loss, model)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    return [float(v) for v in losses]


def ulps_apart(a, b):
    """How many float32 values lie from a to b (0: the same bits; both are float32 values)."""

    def ordered(x):
        (i,) = struct.unpack("<i", struct.pack("<f", x))
        return i if i >= 0 else -(i & 0x7FFFFFFF)  # the float32 values in order, -0.0 next to +0.0

    return abs(ordered(a) - ordered(b))


def loss_tolerance_ulps(world, step):
    """The documented bound (docs/python.md, "Numerics"): 2(n - 1) ulps per Partial sum on the loss's path at step k:
    the loss's own reduction, the forward's reduce-scatter and one per earlier weight update; 0 on 2 ranks."""
    return 0 if world <= 2 else 2 * (world - 1) * (step + 2)


def compare_losses(pytorch, reshard, world):
    """One line per step and a verdict line; True when every step is within its tolerance."""
    worst, ok = 0, True
    for step, (a, b) in enumerate(zip(pytorch, reshard)):
        ulps, tolerance = ulps_apart(a, b), loss_tolerance_ulps(world, step)
        worst = max(worst, ulps)
        ok = ok and ulps <= tolerance
        verdict = ("equal" if ulps == 0 else f"{ulps} ulps apart, within rounding (tolerance {tolerance})"
                   if ulps <= tolerance else f"{ulps} ulps apart: beyond the tolerance of {tolerance} ulps")
        print(f"step {step}: loss {a:.9g} (PyTorch)  {b:.9g} (reshard)  {verdict}")
    print(f"largest difference: {worst} ulps on {world} ranks: "
          + ("equal within tolerance" if ok else "NOT within tolerance"))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    import reshard.torch as rt

    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    results = {}
    for name in ("pytorch", "reshard"):
        if name == "reshard":
            rt.enable()
        torch._dynamo.reset()
        model = build(mesh)
        step_fn = torch.compile(model) if args.compile else None
        results[name] = train(model, args.steps, step_fn=step_fn)
        rt.disable()
    ok = True
    if dist.get_rank() == 0:
        ok = compare_losses(results["pytorch"], results["reshard"], dist.get_world_size())
        print("reshard.torch.stats():", rt.stats())
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
