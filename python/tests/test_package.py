"""The package as pip installs it: its metadata, where it is imported from, and `reshard.torch` without PyTorch.

ctest runs this suite against the package installed into a virtual environment (python/CMakeLists.txt sets
RESHARD_INSTALLED_PREFIX to that environment); run by hand with PYTHONPATH=build/python, the install checks skip."""

import importlib.metadata
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

import reshard

INSTALLED_PREFIX = os.environ.get("RESHARD_INSTALLED_PREFIX")
installed_only = pytest.mark.skipif(not INSTALLED_PREFIX, reason="not run against an installed package")


@installed_only
def test_the_package_comes_from_the_environment_not_the_source_or_build_tree():
    path = pathlib.Path(reshard.__file__).resolve()
    assert path.is_relative_to(pathlib.Path(INSTALLED_PREFIX).resolve()), path
    assert "site-packages" in path.parts, path
    assert pathlib.Path(reshard._core.__file__).parent == path.parent


@installed_only
def test_metadata_names_the_version_and_numpy():
    meta = importlib.metadata.metadata("reshard")
    assert meta["Name"] == "reshard"
    assert meta["Version"] == reshard.__version__
    assert meta["License"] == "BSD-3-Clause"
    requires = importlib.metadata.requires("reshard")
    assert any(r.startswith("numpy") for r in requires), requires
    assert any(r.startswith("torch") and "extra" in r for r in requires), requires
    files = {str(f) for f in importlib.metadata.files("reshard")}
    assert any(f.startswith("reshard/_core") for f in files), sorted(files)
    assert "reshard/torch/__init__.py" in files


def test_readme_one_liner_from_another_folder(tmp_path):
    # The README's command, from a folder without the sources: the seed example's plan as JSON.
    code = "import reshard; print(reshard.plan([2,2],'S0,S1','S1,S0',[8,8]).json())"
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert plan["global_shape"] == [8, 8]
    assert plan["src"] == {"mesh": [2, 2], "placements": ["S0", "S1"]}
    assert plan["dst"] == {"mesh": [2, 2], "placements": ["S1", "S0"]}


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_reshard_torch_without_torch_says_what_to_install():
    with pytest.raises(ImportError) as e:
        import reshard.torch  # noqa: F401
    message = str(e.value)
    assert "\n" not in message
    assert "pip install torch" in message
    assert e.value.__cause__ is None
