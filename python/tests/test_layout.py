"""reshard.layout against PyTorch's own layouts (tests/data/pytorch_layouts_dev.json, computed by PyTorch 2.11's
_compute_local_shape_and_global_offset) and against `reshard layout --json`."""

import json

import pytest

import reshard


class Shard:  # stand-ins for PyTorch's placement classes (matched by class name and attributes)
    def __init__(self, dim):
        self.dim = dim


class Replicate:
    pass


class Partial:
    def __init__(self, reduce_op="sum"):
        self.reduce_op = reduce_op


def test_every_pytorch_conformance_case(data_dir):
    cases = json.loads((data_dir / "pytorch_layouts_dev.json").read_text())["cases"]
    assert len(cases) >= 400
    for case in cases:
        got = reshard.layout(case["mesh"], case["placements"], case["global_shape"])
        assert got["global_shape"] == case["global_shape"]
        assert len(got["ranks"]) == len(case["ranks"])
        for mine, theirs in zip(got["ranks"], case["ranks"]):
            assert mine["coord"] == theirs["coord"], case
            assert mine["local_shape"] == theirs["local_shape"], case
            assert mine["global_offset"] == theirs["global_offset"], case


CLI_CASES = [
    ("2x3", "S0,R", "7x5"),
    ("2", "S-1", "3x5"),
    ("2x2", "S0,S0", "7x3"),
    ("4", "S1", "2x3"),
    ("2x2x2", "P,S1,S(0)", "5x9x2"),
    ("3", "R", "0x4"),
    ("2x1", "Shard(1),Partial(avg)", "1x1"),
]


@pytest.mark.parametrize("mesh,placements,shape", CLI_CASES)
def test_equals_cli_json(cli, mesh, placements, shape):
    expected = json.loads(cli("layout", "--mesh", mesh, "--placements", placements, "--shape", shape, "--json").stdout)
    assert reshard.layout(mesh, placements, shape) == expected
    # The same through Python values: sequences of ints, lists of strings.
    mesh_seq = [int(v) for v in mesh.split("x")]
    shape_seq = [int(v) for v in shape.split("x")]
    assert reshard.layout(mesh_seq, placements.split(",") if "(" not in placements else placements, shape_seq) == (
        expected
    )


def test_placement_objects_and_explicit_ranks(cli):
    expected = json.loads(
        cli("layout", "--mesh", "2x2", "--placements", "S1,P(max)", "--shape", "6x7", "--ranks", "3,1,2,0",
            "--json").stdout
    )
    got = reshard.layout((2, 2), [Shard(1), Partial("max")], (6, 7), ranks=[3, 1, 2, 0])
    assert got == expected
    assert reshard.layout(4, [Replicate()], [3])["ranks"][3]["local_shape"] == [3]


BAD = [
    (("2x0", "S0", "4"), "layout"),
    (("2", "Q", "4"), "layout"),
    (("2", "S0,R", "4"), "layout"),
    (("2", "S2", "4x4"), "layout"),
    (("2", "S0", "4x-1"), "layout"),
    (("2", "S0", "4xa"), "layout"),
    (("2x2x2x2x2x2x2x2x2", "R", "4"), "layout"),
    (("", "R", "4"), "layout"),
    (("2", "R", ""), "layout"),
    (("2", "S(0", "4"), "layout"),
]


@pytest.mark.parametrize("args,_", BAD)
def test_bad_input_raises_value_error_with_cli_message(cli, args, _):
    mesh, placements, shape = args
    p = cli("layout", "--mesh", mesh, "--placements", placements, "--shape", shape, "--json", check=False)
    assert p.returncode == 2
    cli_message = p.stderr.strip().split("error: ", 1)[1]
    with pytest.raises(ValueError) as e:
        reshard.layout(mesh, placements, shape)
    assert str(e.value) == cli_message


def test_bad_python_values_raise_value_error():
    for args in [([2, 0], "S0", [4]), ([2], "S0", [4, 2.5]), ([2], ["S0", 5], [4]), (None, "R", [1]),
                 ([2], "R", 7), ([True], "R", [1]), ([2], [object()], [1]), ([1 << 40], "R", [1])]:
        with pytest.raises(ValueError):
            reshard.layout(*args)
