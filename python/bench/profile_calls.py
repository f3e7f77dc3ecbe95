"""Where the host time of one redistribution call goes, from Python (torchrun, 2 or more processes).

    torchrun --nproc-per-node 2 python/bench/profile_calls.py [--calls 300]

For mesh (world,) f32 1024x1024 S0->S1, S0->R and R->S0: the host time per call (perf_counter around `calls`
back-to-back calls, no synchronisation inside) of DTensor.redistribute, reshard.torch.redistribute (which skips
autograd.Function for inputs that need no gradient) and its autograd.Function path, reshard's
prepared executor alone (run_ptr on fixed tensors, and with two outputs alternating: the executor's pointer checks),
the pieces of a call (allocation, the tracing check, the DTensor constructor), then rank 0's cProfile of the reshard calls
(top functions by own time; with --callers REGEX, who calls the functions matching REGEX).
"""

import argparse
import cProfile
import io
import pathlib
import pstats
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gpu"))
import common  # noqa: E402
import reshard.torch as rt  # noqa: E402
from reshard.torch import _dtensor, _ops, _runtime  # noqa: E402
from reshard.torch._autograd import Redistribute  # noqa: E402


def host_us(fn, calls):
    fn()
    torch.cuda.synchronize()
    dist.barrier()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return host


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=common.positive, default=300)
    ap.add_argument("--callers", default=None, help="also print the callers of functions matching this regex")
    args = ap.parse_args()
    rank, world = common.setup()
    mesh = init_device_mesh("cuda", (world,))
    common.log(f"torch {torch.__version__}; torch.Tensor._dtensor__new__: {hasattr(torch.Tensor, '_dtensor__new__')}")
    shape = (1024, 1024)
    for src, dst in (("S0", "S1"), ("S0", "R"), ("R", "S0")):
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global(shape, torch.float32, 3)
        local = common.local_of(full, mesh, src_p, 3, lambda s, sd: common.make_global(s, torch.float32, sd))
        x = DTensor.from_local(local, mesh, src_p, shape=full.shape, stride=full.stride())
        with torch.no_grad():
            row = {"pytorch": host_us(lambda: x.redistribute(mesh, dst_p), args.calls),
                   "reshard": host_us(lambda: rt.redistribute(x, mesh, dst_p), args.calls),
                   "reshard via autograd.Function": host_us(
                       lambda: Redistribute.apply(x, mesh, tuple(dst_p), False, None, None, None), args.calls)}
            entry = next(iter(_runtime._executors.values()))
            out = torch.empty(entry.out_shape, dtype=torch.float32, device="cuda")
            stream = torch.cuda.current_stream().cuda_stream
            row["run_ptr"] = host_us(lambda: entry.redistributor.run_ptr(local.data_ptr(), out.data_ptr(), stream),
                                     args.calls)
            outs = [out, torch.empty_like(out)]
            flip = iter(range(1 << 30))
            row["run_ptr, outputs alternating"] = host_us(
                lambda: entry.redistributor.run_ptr(local.data_ptr(), outs[next(flip) & 1].data_ptr(), stream),
                args.calls)
            row["torch.empty"] = host_us(lambda: torch.empty(entry.out_shape, dtype=torch.float32, device="cuda"),
                                         args.calls)
            row["local.new_empty"] = host_us(lambda: local.new_empty(entry.out_shape), args.calls)
            row["_are_we_tracing"] = host_us(_ops._are_we_tracing, args.calls)
            row["_ops.tracing"] = host_us(_ops.tracing, args.calls)
            y = rt.redistribute(x, mesh, dst_p)
            row["DTensor()"] = host_us(lambda: DTensor(out, y._spec, requires_grad=False), args.calls)
            row["_dtensor.make"] = host_us(lambda: _dtensor.make(out, y._spec, False), args.calls)
            row["DTensor.from_local"] = host_us(
                lambda: DTensor.from_local(out, mesh, dst_p, run_check=False, shape=full.shape, stride=full.stride()),
                args.calls)
            common.log(f"{src}->{dst} host us per call: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()))
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                rt.redistribute(x, mesh, dst_p)
            prof.disable()
            torch.cuda.synchronize()
            if rank == 0:
                s = io.StringIO()
                st = pstats.Stats(prof, stream=s).sort_stats("tottime")
                st.print_stats(22)
                if args.callers:
                    st.sort_stats("cumulative").print_callers(args.callers)
                print(f"== cProfile {src}->{dst}, {args.calls} calls\n" + s.getvalue(), flush=True)
        rt.clear_cache()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
