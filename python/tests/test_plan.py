"""reshard.plan against `reshard plan --json` (exact text), its properties, SVG and reloading."""

import json

import numpy as np
import pytest

import reshard

CASES = [
    # (CLI flags, Python call)
    (["--mesh", "2x2", "--from", "S0,S1", "--to", "S1,S0", "--shape", "8192x8192", "--dtype", "bf16"],
     dict(mesh=[2, 2], src="S0,S1", dst="S1,S0", shape=[8192, 8192], dtype="bf16")),
    (["--mesh", "4", "--from", "S0", "--to", "R", "--shape", "1000x37"],
     dict(mesh=4, src=["S0"], dst=["R"], shape=(1000, 37))),
    (["--mesh", "2x2", "--from", "P,S1", "--to", "S0,R", "--shape", "9x7", "--dtype", "f64", "--strategy", "collective"],
     dict(mesh="2x2", src="P,S1", dst="S0,R", shape="9x7", dtype=np.float64, strategy="collective")),
    (["--mesh", "2x4", "--from", "S0,S1", "--to", "S1,S0", "--shape", "4096x4096", "--strategy", "p2p",
      "--ranks-per-node", "4"],
     dict(mesh=[2, 4], src="S0,S1", dst="S1,S0", shape=[4096, 4096], strategy="p2p", ranks_per_node=4)),
    (["--mesh", "2x2", "--from", "S0,S0", "--to", "S1,S1", "--shape", "4096x4096", "--memory-budget", "4MiB"],
     dict(mesh=[2, 2], src="S0,S0", dst="S1,S1", shape=[4096, 4096], memory_budget="4MiB")),
    (["--mesh", "2x2", "--from", "S0,S0", "--to", "S1,S1", "--shape", "4096x4096", "--memory-budget", "1048576"],
     dict(mesh=[2, 2], src="S0,S0", dst="S1,S1", shape=[4096, 4096], memory_budget=1 << 20)),
    (["--mesh", "2x2", "--from", "S0,S1", "--to", "S1,S0", "--shape", "64x64", "--rank", "1"],
     dict(mesh=[2, 2], src="S0,S1", dst="S1,S0", shape=[64, 64], rank=1)),
    (["--mesh", "2x2", "--from", "S0,S1", "--to", "R,S0", "--shape", "64x64", "--ranks", "3,2,1,0", "--dtype", "i32"],
     dict(mesh=[2, 2], src="S0,S1", dst="R,S0", shape=[64, 64], ranks=[3, 2, 1, 0], dtype=np.int32)),
    (["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "16384x16384", "--transport", "nccl"],
     dict(mesh=[2], src="S0", dst="S1", shape=[16384, 16384], transport="nccl")),
    (["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "64x64", "--transport", "nvlink", "--fuse", "never"],
     dict(mesh=[2], src="S0", dst="S1", shape=[64, 64], transport="nvlink", fuse="never")),
    (["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "16384x16384", "--low-sm"],
     dict(mesh=[2], src="S0", dst="S1", shape=[16384, 16384], low_sm=True)),
    (["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "1024x1024", "--buffers-change"],
     dict(mesh=[2], src="S0", dst="S1", shape=[1024, 1024], buffers_change=True)),
    (["--mesh", "8", "--from", "P(avg)", "--to", "S1", "--shape", "33x65", "--dtype", "f16"],
     dict(mesh=[8], src="P(avg)", dst="S1", shape=[33, 65], dtype="float16")),
    (["--mesh", "2x2", "--from", "S0,S1", "--to", "S1,S0", "--shape", "64x48", "--strategy", "hybrid"],
     dict(mesh=[2, 2], src=["S0", "S1"], dst=["S1", "S0"], shape=[64, 48], strategy="hybrid")),
    # Between meshes of one world: training (2,4) -> serving on ranks 4 and 5; a disjoint hand-off in a world of 6.
    (["--from-mesh", "2x4", "--to-mesh", "2", "--to-ranks", "4,5", "--from", "S0,S1", "--to", "R", "--shape", "8x6"],
     dict(mesh=[2, 4], src="S0,S1", dst="R", shape=[8, 6], dst_mesh=2, dst_ranks=[4, 5])),
    (["--from-mesh", "2", "--from-ranks", "0-1", "--to-mesh", "3", "--to-ranks", "2-4", "--world-size", "6", "--from",
      "P", "--to", "S0", "--shape", "7x5", "--dtype", "i32"],
     dict(mesh=2, ranks=[0, 1], src="P", dst="S0", shape=[7, 5], dtype="int32", dst_mesh=3, dst_ranks=[2, 3, 4],
          world_size=6)),
]


def test_between_meshes():
    p = reshard.plan([2, 2], "S0,S1", "S1", [8, 8], dst_mesh=[2], dst_ranks=[6, 7], world_size=8)
    assert (p.src_mesh, p.dst_mesh, p.world_size) == ("2x2[0,1,2,3]/8", "2[6,7]/8", 8)
    assert p.strategy == "p2p"
    assert [c["available"] for c in p.candidates if c["strategy"] != "p2p"] == [False, False]
    with pytest.raises(ValueError, match="rank 6 appears twice"):
        reshard.plan([2, 2], "S0,S1", "S1", [8, 8], dst_mesh=[2], dst_ranks=[6, 6])
    with pytest.raises(ValueError, match="rank list entry 9 is outside 0..7"):
        reshard.plan([2, 2], "S0,S1", "S1", [8, 8], dst_mesh=[2], dst_ranks=[6, 9], world_size=8)


def test_run_host_between_meshes():
    """(2,2) on ranks 0-3 -> (2) on ranks 3 and 4 of a world of 5: every rank's shard, empty outside a mesh."""
    from reshard import _core

    full = np.arange(6 * 4, dtype=np.int32).reshape(6, 4)
    a = _core.PlanArgs()
    a.mesh, a.src, a.dst, a.shape, a.dtype = "2x2", "S0,S1", "S1", "6x4", "i32"
    a.dst_mesh, a.dst_ranks, a.world_size = "2", [3, 4], 5
    shards = [full[0:3, 0:2], full[0:3, 2:4], full[3:6, 0:2], full[3:6, 2:4], np.zeros((0, 0), np.int32)]
    out = _core.run_host(a, [np.ascontiguousarray(s) for s in shards])
    assert [o.shape for o in out] == [(0, 0), (0, 0), (0, 0), (6, 2), (6, 2)]
    assert np.array_equal(out[3], full[:, 0:2]) and np.array_equal(out[4], full[:, 2:4])


@pytest.mark.parametrize("flags,kwargs", CASES)
def test_json_equals_cli(cli, flags, kwargs):
    expected = cli("plan", *flags, "--json").stdout
    p = reshard.plan(**kwargs)
    assert p.json() == expected
    doc = json.loads(expected)
    assert p.strategy == doc["strategy"]
    chosen = [c for c in doc["candidates"] if c["strategy"] == p.strategy and c["estimated_us"] == p.estimated_us]
    assert p.transport in [c["transport"] for c in chosen], (p.transport, chosen)
    assert p.estimated_us == doc["estimated_us"]
    assert p.bytes_moved == doc["bytes_moved"]
    assert p.peak_workspace_bytes == doc["peak_workspace_bytes"]
    assert p.dtype == doc["dtype"]
    assert p.global_shape == doc["global_shape"]
    assert p.src == doc["src"]["placements"] and p.dst == doc["dst"]["placements"]
    assert p.num_steps == len(doc["steps"])
    assert p.candidates == doc["candidates"]
    assert p.table() == cli("plan", *flags).stdout


def test_svg_equals_cli(cli, tmp_path):
    out = tmp_path / "plan.svg"
    cli("plan", "--mesh", "2x2", "--from", "S0,S1", "--to", "S1,S0", "--shape", "64x64", "--svg", str(out))
    assert reshard.plan([2, 2], "S0,S1", "S1,S0", [64, 64]).svg() == out.read_text()


def test_from_json_round_trips():
    p = reshard.plan([2, 2], "S0,S1", "S1,R", [100, 30], "bf16")
    q = reshard.Plan.from_json(p.json())
    assert q.json() == p.json()
    with pytest.raises(ValueError):
        reshard.Plan.from_json('{"schema": "reshard.plan/1"}')
    with pytest.raises(ValueError):
        reshard.Plan.from_json("not json")


def test_profile_path(cli, tmp_path, data_dir):
    profile = data_dir.parent.parent / "bench" / "profiles"
    files = sorted(profile.glob("*.json")) if profile.exists() else []
    if not files:
        pytest.skip("no committed profile")
    flags = ["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "4096x4096", "--profile", str(files[0])]
    assert reshard.plan(2, "S0", "S1", [4096, 4096], profile=files[0]).json() == cli("plan", *flags, "--json").stdout


BAD = [
    ["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "8x8", "--dtype", "f8"],
    ["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "8x8", "--strategy", "fastest"],
    ["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "8x8", "--transport", "carrier-pigeon"],
    ["--mesh", "2", "--from", "S0", "--to", "S1,R", "--shape", "8x8"],
    ["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "8x8", "--ranks-per-node", "0"],
    ["--mesh", "2x2", "--from", "S0,S0", "--to", "S1,S1", "--shape", "4096x4096", "--memory-budget", "1",
     "--transport", "nccl"],
    ["--mesh", "2", "--from", "P(avg)", "--to", "S1", "--shape", "8x8", "--dtype", "i8", "--strategy", "collective"],
    ["--mesh", "2", "--from", "S0", "--to", "S1", "--shape", "8x8", "--profile", "/nonexistent/profile.json"],
]


def _kwargs(flags):
    it = iter(flags)
    f = dict(zip(it, it))
    kw = dict(mesh=f["--mesh"], src=f["--from"], dst=f["--to"], shape=f["--shape"], dtype=f.get("--dtype", "f32"),
              strategy=f.get("--strategy", "auto"), transport=f.get("--transport", "auto"),
              ranks_per_node=int(f.get("--ranks-per-node", 8)))
    if "--memory-budget" in f:
        kw["memory_budget"] = int(f["--memory-budget"])
    if "--profile" in f:
        kw["profile"] = f["--profile"]
    return kw


@pytest.mark.parametrize("flags", BAD)
def test_bad_input_raises_value_error_with_cli_message(cli, flags):
    p = cli("plan", *flags, check=False)
    assert p.returncode == 2, p.stderr
    cli_message = p.stderr.strip().split("error: ", 1)[1]
    with pytest.raises(ValueError) as e:
        reshard.plan(**_kwargs(flags))
    assert str(e.value) == cli_message


def test_bad_python_values():
    with pytest.raises(ValueError, match="memory_budget"):
        reshard.plan(2, "S0", "S1", [8, 8], memory_budget="lots")
    with pytest.raises(ValueError, match="must be >= 0"):
        reshard.plan(2, "S0", "S1", [8, 8], memory_budget=-1)
    with pytest.raises(ValueError):
        reshard.plan(2, "S0", "S1", [8, 8], dtype=np.uint32)
    with pytest.raises(ValueError):
        reshard.plan(2, "S0", "S1", [8, 8], rank=2)


def test_profile_path_with_nul_is_refused(data_dir):
    # Opened as given, the path would be cut at the NUL and name another (existing) file.
    profile = data_dir.parent.parent / "bench" / "profiles" / "h100x2.json"
    with pytest.raises(ValueError, match="NUL byte"):
        reshard.plan(2, "S0", "S1", [8, 8], profile=str(profile) + "\0.bak")


def test_a_plan_never_initialised_is_refused_not_a_crash():
    p = reshard.Plan.__new__(reshard.Plan)
    for use in (p.json, p.table, p.svg, lambda: p.strategy, lambda: repr(p)):
        with pytest.raises(TypeError, match="never initialised"):
            use()
    with pytest.raises(TypeError, match="expected a reshard.Plan"):
        reshard.Plan.json(5)


def test_python_numbers_are_checked_as_the_cli_checks_them():
    with pytest.raises(TypeError, match=r"ranks\[0\] must be an int, got float 1.9"):
        reshard.plan([2], "S0", "R", [8], ranks=[1.9, 0])
    with pytest.raises(TypeError, match="rank must be an int"):
        reshard.plan([2], "S0", "R", [8], rank=2.7)
    with pytest.raises(ValueError, match=r"rank must be in 0\.\.2147483647, got 4294967296"):
        reshard.plan([2], "S0", "R", [8], rank=2**32)
    with pytest.raises(ValueError, match="ranks-per-node must be >= 1"):
        reshard.plan([2], "S0", "R", [8], ranks_per_node=0)
    with pytest.raises(TypeError, match="got None"):
        reshard.plan([2], "S0", "R", [8], dtype=None)
    assert reshard.plan([2], "S0", "R", [8], ranks=[1, 0], rank=1).rank == 1
