"""One option table for every front end (plan_option_table.hpp): the CLI's `plan`, `run` and `bench` flags and the
keywords of reshard.plan, run_host and run_host_batch are its rows, parsed and range-checked alike."""

import inspect
import json
import re

import pathlib

import numpy as np
import pytest

import reshard
from reshard import _core

NAMES = _core.plan_option_names()
PROFILE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "profiles" / "h100x2.json"
# A valid value per option, and what the plan's JSON says when it is set (None: the option leaves no trace there).
VALUES = {"strategy": ("p2p", ("strategy", "p2p")), "transport": ("nccl", None),
          "fuse": ("never", None), "ranks_per_node": (2, ("ranks_per_node", 2)), "profile": (str(PROFILE), ("profile", json.loads(PROFILE.read_text())["name"])),
          "memory_budget": ("64MiB", ("memory_budget_bytes", 64 << 20)), "max_collectives": (1, None),
          "pipeline_chunk": ("16MiB", ("pipeline_chunk_bytes", 16 << 20)), "low_sm": (True, ("low_sm", True)),
          "buffers_change": (True, ("buffers_change", True)), "relay": ("never", None)}


def flags_of(cli, command):
    return set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", cli(command, "--help").stdout, re.M))


def test_the_table_is_every_option_of_plan_and_of_the_host_runs():
    assert sorted(NAMES) == sorted(VALUES)
    for fn in (reshard.plan, reshard.run_host, reshard.run_host_batch):
        keywords = set(inspect.signature(fn).parameters)
        assert set(NAMES) <= keywords, (fn.__name__, sorted(set(NAMES) - keywords))


def test_the_cli_takes_every_option_as_a_flag(cli):
    flag = {n: "--" + n.replace("_", "-") for n in NAMES}
    for command in ("plan", "run"):
        assert set(flag.values()) <= flags_of(cli, command), command
    # bench sweeps strategies and transports (--strategies, --transports); every other option applies to all runs
    assert {f for n, f in flag.items() if n not in ("strategy", "transport")} <= flags_of(cli, "bench")


@pytest.mark.parametrize("name", sorted(VALUES))
def test_each_option_reaches_the_plan_as_the_cli_sets_it(cli, name):
    value, shown = VALUES[name]
    p = reshard.plan([4], "S0", "S1", [64, 48], **{name: value})
    flag = "--" + name.replace("_", "-")
    args = [flag] if isinstance(value, bool) else [flag, str(value)]
    out = cli("plan", "--mesh", "4", "--from", "S0", "--to", "S1", "--shape", "64x48", "--json", "-", *args).stdout
    assert json.loads(p.json()) == json.loads(out[out.index("{"):])
    if shown is not None:
        assert json.loads(p.json())[shown[0]] == shown[1]
    shards = [np.arange(16 * 48, dtype=np.float32).reshape(16, 48) + 1000 * r for r in range(4)]
    full = np.concatenate(shards)
    outs = reshard.run_host([4], "S0", "S1", shards, **{name: value})
    for r, o in enumerate(outs):
        np.testing.assert_array_equal(o, full[:, 12 * r:12 * (r + 1)])


@pytest.mark.parametrize("name,value,message", [
    ("ranks_per_node", 0, "--ranks-per-node must be >= 1, got 0"),
    ("max_collectives", -2, "--max-collectives must be >= 0, got -2"),
    ("memory_budget", -1, "--memory-budget must be >= 0 bytes, got -1"),
    ("pipeline_chunk", "lots", "pipeline_chunk 'lots' is not a byte count"),
])
def test_bad_values_fail_in_one_line_as_on_the_cli(cli, name, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        reshard.plan([4], "S0", "S1", [64, 48], **{name: value})
