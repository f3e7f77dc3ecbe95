"""reshard.torch against PyTorch's DTensor, on GPUs (torchrun --nproc-per-node 2 python/tests/gpu/check_redistribute.py
--out DIR).

For every pair of placements from R, S0, S1, P(sum), P(avg) per mesh dim, on meshes (2), (1,2), (2,1) (and (4), (2,2)
on 4 GPUs), dtypes f32, bf16, i32, complex64, global shapes 0x6, 1x1, 7x5 (uneven) and 1 GiB:
- pairs DTensor.redistribute accepts (no new Partial): reshard.torch.redistribute's result must equal
  DTensor.redistribute's bitwise, with the same placements and DTensorSpec (or raise the same error); for float dtypes
  the source's gradient after backward(random gradient) must equal PyTorch's, bitwise, with the same placements;
- pairs into a new Partial (PyTorch's internal path): the function enable() installs must return what PyTorch's
  redistribute_local_tensor returns, bitwise.
At 1 GiB every pair and dtype runs on mesh (2); on (1,2) and (2,1) the f32 pairs.
Also: CUDA-graph capture and replay, forward_dtype/backward_dtype, and that reshard (not the PyTorch fallback) ran.
Results: DIR/redistribute.json (every case) and DIR/redistribute_summary.json. Exit status 1 on any mismatch.
"""

import argparse
import itertools
import pathlib
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec

import common
import reshard.torch as rt
from reshard.torch import _patch

SIZES = {"empty": (0, 6), "one": (1, 1), "uneven": (7, 5)}
GIB_SHAPES = {"f32": (16384, 16384), "bf16": (16384, 32768), "i32": (16384, 16384), "c64": (16384, 8192)}


def noise(dtype):
    """Per-rank Partial contributions: small integers, so that sums are exact in every dtype and summation order."""
    return lambda shape, seed: common.make_global(shape, dtype, seed, common.exact_bound(dist.get_world_size()))


def full_value(local, mesh, placements, full):
    """The global value a rank's local tensor stands for, by PyTorch (reshard not enabled here)."""
    dt = DTensor.from_local(local, mesh, placements, shape=full.shape, stride=full.stride())
    return _patch.original()(dt._local_tensor, dt._spec, DTensorSpec(mesh, tuple(common.placement("R") for _ in
                                                                                  placements),
                                                                      tensor_meta=dt._spec.tensor_meta))


def run_case(mesh, mesh_shape, src, dst, dtype_name, shape, seed):
    dtype = common.DTYPES[dtype_name]
    src_p = [common.placement(t) for t in src]
    dst_p = [common.placement(t) for t in dst]
    full = common.make_global(shape, dtype, seed, common.exact_bound(dist.get_world_size()))
    local = common.local_of(full, mesh, src_p, seed, noise(dtype))
    record = {"mesh": list(mesh_shape), "src": src, "dst": dst, "dtype": dtype_name, "shape": list(shape)}
    public = not any(d.is_partial() and s != d for s, d in zip(src_p, dst_p))
    differentiable = public and (dtype.is_floating_point or dtype.is_complex)
    before = rt.stats()

    def make_input():
        x = DTensor.from_local(local.clone(), mesh, src_p, shape=full.shape, stride=full.stride())
        return x.detach().requires_grad_(differentiable)

    ok = True
    if public:
        x_ref, x_got = make_input(), make_input()
        ref = got = ref_err = got_err = None
        try:
            ref = x_ref.redistribute(mesh, dst_p)
        except Exception as e:  # noqa: BLE001 - recorded and compared
            ref_err = f"{type(e).__name__}: {e}"
        try:
            got = rt.redistribute(x_got, mesh, dst_p)
        except Exception as e:  # noqa: BLE001
            got_err = f"{type(e).__name__}: {e}"
        if ref_err or got_err:
            ok = ref_err == got_err
            record.update(status="both raise" if ok else "raise differs", pytorch_error=ref_err, reshard_error=got_err)
        else:
            same = common.same_bits(ref.to_local(), got.to_local())
            spec = ref._spec == got._spec and ref.placements == got.placements and ref.stride() == got.stride()
            record.update(forward_equal=same, spec_equal=spec)
            ok = same and spec
            if differentiable:
                gfull = common.random_like_global(shape, dtype, seed + 7)
                g_local = common.local_of(gfull, mesh, dst_p, seed + 7, lambda s, sd: common.random_like_global(
                    s, dtype, sd))
                grad = DTensor.from_local(g_local, mesh, dst_p, shape=full.shape, stride=full.stride())
                errors = []
                for y in (ref, got):
                    try:
                        y.backward(grad)
                        errors.append(None)
                    except Exception as e:  # noqa: BLE001 - compared below
                        errors.append(f"{type(e).__name__}: {e}")
                if errors[0] or errors[1]:
                    record.update(backward_errors=errors)
                    ok = ok and errors[0] == errors[1]
                else:
                    g_same = common.same_bits(x_ref.grad.to_local(), x_got.grad.to_local())
                    g_spec = x_ref.grad.placements == x_got.grad.placements
                    record.update(grad_equal=g_same, grad_placements_equal=g_spec,
                                  grad_placements=[str(p) for p in x_got.grad.placements])
                    ok = ok and g_same and g_spec
    else:
        x = DTensor.from_local(local, mesh, src_p, shape=full.shape, stride=full.stride())
        target = DTensorSpec(mesh, tuple(dst_p), tensor_meta=x._spec.tensor_meta)
        ref = got = ref_err = got_err = None
        try:
            ref = _patch.original()(local, x._spec, target)
        except Exception as e:  # noqa: BLE001
            ref_err = f"{type(e).__name__}: {e}"
        try:
            got = _patch.redistribute_local_tensor(local, x._spec, target)
        except Exception as e:  # noqa: BLE001
            got_err = f"{type(e).__name__}: {e}"
        if ref_err and not got_err:
            # PyTorch refuses what reshard does (S->P): check reshard's result means the same global value.
            want = full_value(local, mesh, src_p, full)
            have = full_value(got, mesh, dst_p, full)
            exact = torch.equal(want, have)
            record.update(status="pytorch raises", pytorch_error=ref_err, value_equal=exact)
            ok = exact or not (dtype.is_floating_point or dtype.is_complex)
        elif ref_err or got_err:
            ok = ref_err == got_err
            record.update(status="both raise" if ok else "raise differs", pytorch_error=ref_err, reshard_error=got_err)
        else:
            if hasattr(ref, "wait"):
                ref = ref.wait()
            same = common.same_bits(ref, got)
            record.update(internal=True, forward_equal=same)
            ok = same
    after = rt.stats()
    record["path"] = "reshard" if after["reshard"] > before["reshard"] else (
        "noop" if after["noop"] > before["noop"] else "pytorch")
    if after["pytorch"] > before["pytorch"]:
        new = {k: v - before["fallback_reasons"].get(k, 0) for k, v in after["fallback_reasons"].items()}
        record["fallback"] = sorted(k for k, v in new.items() if v > 0)
    record["ok"] = common.all_ranks_true(ok)
    return record


def cuda_graph_cases(mesh):
    """Capture reshard.torch.redistribute in a CUDA graph after a warm-up run; replays must reproduce eager results."""
    out = []
    for src, dst in [("S0", "S1"), ("S0", "R"), ("R", "S1"), ("P", "R"), ("P", "S0")]:
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global((1024, 1024), torch.float32, 11)
        local = common.local_of(full, mesh, src_p, 11, noise(torch.float32))
        x = DTensor.from_local(local, mesh, src_p, shape=full.shape, stride=full.stride())
        record = {"src": src, "dst": dst}
        with torch.no_grad():
            eager = rt.redistribute(x, mesh, dst_p).to_local().clone()
            torch.cuda.synchronize()
            ok = False
            for mode in ("global", "relaxed"):  # PyTorch's default capture mode first
                try:
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, capture_error_mode=mode):
                        y = rt.redistribute(x, mesh, dst_p)
                except Exception as e:  # noqa: BLE001 - recorded
                    record[f"{mode}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                    torch.cuda.synchronize()
                    continue
                ok = True
                for _ in range(3):
                    y.to_local().zero_()
                    graph.replay()
                    torch.cuda.synchronize()
                    ok = ok and common.same_bits(y.to_local(), eager)
                record["capture_mode"] = mode
                break
        record.update(graph_equal=ok, ok=common.all_ranks_true(ok and record.get("capture_mode") == "global"))
        out.append(record)
    return out


def dtype_cast_cases(mesh):
    out = []
    for src, dst, fwd, bwd in [("S0", "R", torch.bfloat16, None), ("S0", "S1", torch.bfloat16, torch.float32),
                               ("P", "S1", None, torch.bfloat16), ("R", "S0", torch.float16, torch.float16)]:
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global((64, 48), torch.float32, 5)
        local = common.local_of(full, mesh, src_p, 5, noise(torch.float32))
        grads = []
        results = []
        for fn in (lambda x: x.redistribute(mesh, dst_p, forward_dtype=fwd, backward_dtype=bwd),
                   lambda x: rt.redistribute(x, mesh, dst_p, forward_dtype=fwd, backward_dtype=bwd)):
            x = DTensor.from_local(local.clone(), mesh, src_p, shape=full.shape, stride=full.stride())
            x = x.detach().requires_grad_(True)
            y = fn(x)
            g = DTensor.from_local(torch.ones_like(y.to_local()) * 0.3, mesh, dst_p, shape=full.shape,
                                   stride=full.stride())
            y.backward(g)
            results.append(y)
            grads.append(x.grad)
        ok = (common.same_bits(results[0].to_local(), results[1].to_local()) and results[0]._spec == results[1]._spec
              and common.same_bits(grads[0].to_local(), grads[1].to_local())
              and grads[0].placements == grads[1].placements)
        out.append({"src": src, "dst": dst, "forward_dtype": str(fwd), "backward_dtype": str(bwd),
                    "ok": common.all_ranks_true(ok)})
    return out


def repeat_cases(mesh):
    """Repeated calls (reshard.torch's repeat path): the same DTensor again, a new DTensor of the same spec with
    other values, and two redistributions alternating with one prepared executor kept (each call evicts the
    other's), every result equal to PyTorch's."""
    out = []
    pairs = [("S0", "S1"), ("S0", "R"), ("P", "S0"), ("R", "S0"), ("S0", "S0"), ("P", "R")]
    xs = {}
    for src, dst in pairs:
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global((96, 40), torch.float32, 11)
        xs[(src, dst)] = [DTensor.from_local(common.local_of(full, mesh, src_p, seed, noise(torch.float32)), mesh,
                                             src_p, shape=full.shape, stride=full.stride()) for seed in (11, 12)]
    for cache_size in (256, 1):
        rt.configure(cache_size=cache_size)
        for _ in range(3):
            for (src, dst), (x0, x1) in xs.items():
                dst_p = [common.placement(dst)]
                for x in (x0, x1, x0):
                    want, got = x.redistribute(mesh, dst_p), rt.redistribute(x, mesh, dst_p)
                    ok = common.same_bits(want.to_local(), got.to_local()) and want._spec == got._spec
                    out.append({"src": src, "dst": dst, "cache_size": cache_size, "ok": common.all_ranks_true(ok)})
    rt.configure(cache_size=256)
    return out


def enabled_method_cases(mesh):
    """With enable(), the method DTensor.redistribute is reshard.torch.redistribute for eager calls: its results,
    specs and gradients (with and without dtype casts) must equal PyTorch's method's, computed before enabling, and the
    calls must go through reshard; disable() must put PyTorch's method back."""
    out = []
    original = DTensor.redistribute
    cases = [("S0", "S1", None, None), ("P", "S0", None, None), ("S0", "R", torch.bfloat16, None),
             ("R", "S1", None, torch.bfloat16)]
    for src, dst, fwd, bwd in cases:
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global((72, 40), torch.float32, 17)
        local = common.local_of(full, mesh, src_p, 17, noise(torch.float32))
        results = []
        for enabled in (False, True):
            for needs_grad in (False, True):
                x = DTensor.from_local(local.clone(), mesh, src_p, shape=full.shape, stride=full.stride())
                x = x.detach().requires_grad_(needs_grad)
                before = rt.stats()["reshard"]
                if enabled:
                    rt.enable()
                try:
                    y = x.redistribute(mesh, dst_p, forward_dtype=fwd, backward_dtype=bwd)
                    if needs_grad:
                        y.backward(DTensor.from_local(torch.ones_like(y.to_local()) * 0.5, mesh, dst_p,
                                                      shape=full.shape, stride=full.stride()))
                finally:
                    rt.disable()
                results.append((y, x.grad, rt.stats()["reshard"] - before))
        ok = all(common.same_bits(results[i][0].to_local(), results[i + 2][0].to_local())
                 and results[i][0]._spec == results[i + 2][0]._spec for i in (0, 1))
        ok = ok and common.same_bits(results[1][1].to_local(), results[3][1].to_local())
        ok = ok and results[1][1].placements == results[3][1].placements
        ok = ok and results[0][2] == 0 and results[2][2] > 0 and results[3][2] > 0
        out.append({"case": f"enabled x.redistribute {src}->{dst} forward_dtype={fwd} backward_dtype={bwd}",
                    "ok": common.all_ranks_true(ok)})
    out.append({"case": "disable() restores DTensor.redistribute",
                "ok": common.all_ranks_true(DTensor.redistribute is original)})
    return out


def profile_cases(mesh):
    """configure(profile=...): a missing file raises ValueError and changes nothing; a profile file plans (the
    results equal PyTorch's); "" restores the built-in profile."""
    out = []
    try:
        rt.configure(profile="/nonexistent/profile.json")
        raised = False
    except ValueError:
        raised = True
    settings = rt.configure()
    out.append({"case": "missing file", "ok": common.all_ranks_true(raised and settings["profile"] is None)})
    # A value that cannot be converted (a profile that is no path, a strategy given as a number) raises ValueError
    # and leaves every setting as it was, those given before it included.
    before = rt.configure()
    for bad in ({"cache_size": 7, "profile": 5}, {"timeout_s": 9.0, "profile": b"p"}, {"cache_size": "many"}):
        try:
            rt.configure(**bad)
            raised = False
        except ValueError:
            raised = True
        except TypeError:
            raised = False
        out.append({"case": f"configure({', '.join(f'{k}={v!r}' for k, v in bad.items())})",
                    "ok": common.all_ranks_true(raised and rt.configure() == before)})
    path = pathlib.Path(__file__).resolve().parents[3] / "bench" / "profiles" / "h100x2.json"
    rt.configure(profile=str(path))
    for src, dst in (("S0", "S1"), ("P", "S0"), ("S0", "R")):
        src_p, dst_p = [common.placement(src)], [common.placement(dst)]
        full = common.make_global((256, 64), torch.float32, 13)
        x = DTensor.from_local(common.local_of(full, mesh, src_p, 13, noise(torch.float32)), mesh, src_p,
                               shape=full.shape, stride=full.stride())
        ok = common.same_bits(x.redistribute(mesh, dst_p).to_local(), rt.redistribute(x, mesh, dst_p).to_local())
        out.append({"case": f"{path.name} {src}->{dst}", "ok": common.all_ranks_true(ok)})
    settings = rt.configure(profile="")
    out.append({"case": "built-in again", "ok": common.all_ranks_true(settings["profile"] is None)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-gib", action="store_true", help="skip the 1 GiB cases")
    ap.add_argument("--time-limit", type=float, default=420.0, help="seconds; cases left then are reported skipped")
    args = ap.parse_args()
    rank, world = common.setup()
    t0 = time.time()
    mesh_shapes = [(2,), (1, 2), (2, 1)] if world == 2 else [(world,), (2, world // 2)]
    meshes = {m: init_device_mesh("cuda", m) for m in mesh_shapes}
    plan = []  # (mesh shape, size name, dtype name): mesh (2) first, 1 GiB on the 2-D meshes last
    for m in mesh_shapes:
        for size_name, dtype_name in itertools.product(list(SIZES) + ["1GiB"], ["f32", "bf16", "i32", "c64"]):
            if size_name == "1GiB" and (args.no_gib or (len(m) > 1 and dtype_name != "f32")):
                continue
            plan.append((m, size_name, dtype_name))
    plan.sort(key=lambda p: (p[1] == "1GiB" and len(p[0]) > 1, mesh_shapes.index(p[0])))
    results, skipped = [], 0
    for mesh_shape, size_name, dtype_name in plan:
        mesh = meshes[mesh_shape]
        layouts = [list(c) for c in itertools.product(common.PLACEMENT_KINDS, repeat=len(mesh_shape))]
        shape = GIB_SHAPES[dtype_name] if size_name == "1GiB" else SIZES[size_name]
        for i, (src, dst) in enumerate(itertools.product(layouts, repeat=2)):
            # Every rank stops at the same case: each rank's own clock would let one rank skip a case its peer
            # still runs, and the peer would wait in that case's collectives forever.
            if not common.all_ranks_true(time.time() - t0 <= args.time_limit):
                skipped += 1
                continue
            try:
                r = run_case(mesh, mesh_shape, src, dst, dtype_name, shape, seed=1000 + i)
            except Exception as e:  # noqa: BLE001 - a failure of the harness or of an API, recorded as failing
                r = {"mesh": list(mesh_shape), "src": src, "dst": dst, "dtype": dtype_name, "ok": False,
                     "error": f"{type(e).__name__}: {e}"}
            r["size"] = size_name
            results.append(r)
            if not r["ok"]:
                common.log("MISMATCH", r)
            if size_name == "1GiB":
                rt.clear_cache()  # 1 GiB workspaces do not stay around
        common.log(f"mesh {mesh_shape} {size_name} {dtype_name}: {len(results)} cases so far, "
                   f"{sum(not r['ok'] for r in results)} failing, {time.time() - t0:.0f} s")
        common.write_json(args.out, "redistribute.json", results)  # so far (a killed run leaves what it did)
    graph = cuda_graph_cases(meshes[mesh_shapes[0]])
    casts = dtype_cast_cases(meshes[mesh_shapes[0]])
    repeats = repeat_cases(meshes[mesh_shapes[0]])
    profiles = profile_cases(meshes[mesh_shapes[0]]) + enabled_method_cases(meshes[mesh_shapes[0]])
    stats = rt.stats()
    summary = {
        "versions": common.versions(),
        "cases": len(results),
        "failing": sum(not r["ok"] for r in results),
        "skipped_for_time": skipped,
        "by_path": {p: sum(r["path"] == p for r in results) for p in ("reshard", "pytorch", "noop")},
        "forward_compared": sum("forward_equal" in r for r in results),
        "grads_compared": sum("grad_equal" in r for r in results),
        "both_raise": sum(r.get("status") == "both raise" for r in results),
        "pytorch_raises_reshard_does": sum(r.get("status") == "pytorch raises" for r in results),
        "cuda_graph": graph,
        "dtype_casts": casts,
        "repeats": {"cases": len(repeats), "failing": sum(not r["ok"] for r in repeats)},
        "profile": profiles,
        "stats": stats,
        "seconds": time.time() - t0,
    }
    failing = (summary["failing"] + sum(not g["ok"] for g in graph) + sum(not c["ok"] for c in casts)
               + summary["repeats"]["failing"] + sum(not p["ok"] for p in profiles))
    summary["ok"] = failing == 0 and stats["reshard"] > 0
    common.write_json(args.out, "redistribute.json", results)
    common.write_json(args.out, "redistribute_summary.json", summary)
    common.log({k: v for k, v in summary.items() if k not in ("cuda_graph", "dtype_casts")})
    dist.barrier()
    dist.destroy_process_group()
    raise SystemExit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
