"""Shared fixtures of the CPU suite: the CLI binary and the conformance data (ctest sets both; see
python/CMakeLists.txt). Run by hand: PYTHONPATH=build/python RESHARD_CLI=build/tools/reshard python3 -m pytest
python/tests. The GPU checks in gpu/ are scripts run under torchrun (gpu/run_all.sh), not collected here."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
collect_ignore = ["gpu"]  # torchrun scripts (check_*.py, one process per GPU), not pytest tests


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("RESHARD_CLI") or str(REPO / "build" / "tools" / "reshard")
    if not os.path.exists(path):
        pytest.skip(f"reshard CLI not found at {path} (set RESHARD_CLI)")

    def run(*args, check=True):
        p = subprocess.run([path, *args], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"reshard {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    return run


@pytest.fixture(scope="session")
def data_dir():
    return pathlib.Path(os.environ.get("RESHARD_TEST_DATA_DIR") or REPO / "tests" / "data")
