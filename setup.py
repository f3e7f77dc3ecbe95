"""pip's way into the CMake build: `pip install .` and `pip wheel .` build the Python package `reshard` with the
project's CMake (reshard._core always; reshard._cuda where nvcc and NCCL are found) and package it with the pure-Python
files of python/reshard and the metadata of pyproject.toml.

NCCL: NCCL_HOME or NCCL_ROOT when set, else PyTorch's (the nvidia-nccl wheel in this interpreter's site-packages),
else the CUDA toolkit's or the system's, as the CMake build finds it.

Environment:
  RESHARD_CMAKE_BUILD_DIR  package the modules of this existing build tree (configured for this interpreter), brought
                           up to date with `cmake --build DIR --target reshard_python`, instead of building afresh
  CMAKE_ARGS               extra configure arguments for a fresh build (e.g. -DRESHARD_CUDA=OFF)
  CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default: every core)
"""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
MODULES = ("_core", "_cuda")  # reshard._cuda only where the CMake build has the CUDA backend


class ReshardBuildError(SystemExit):
    """One line, then pip's own report of the failed build."""

    def __init__(self, message):
        super().__init__(f"reshard: {message}")


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(reshard\s+VERSION\s+([0-9.]+)", text)
    if not m:
        raise ReshardBuildError("no `project(reshard VERSION x.y.z)` in CMakeLists.txt")
    return m.group(1)


def pytorch_nccl():
    """The NCCL of PyTorch's pip wheels (site-packages/nvidia/nccl with include/nccl.h), if installed."""
    for key in ("purelib", "platlib"):
        root = pathlib.Path(sysconfig.get_paths()[key]) / "nvidia" / "nccl"
        if (root / "include" / "nccl.h").exists():
            return root
    return None


def run(*cmd, cwd=None):
    print("reshard:", shlex.join(str(c) for c in cmd), flush=True)
    try:
        subprocess.run([str(c) for c in cmd], check=True, cwd=cwd)
    except FileNotFoundError:
        raise ReshardBuildError(f"{cmd[0]} not found: install CMake 3.24 or newer (and Ninja)") from None
    except subprocess.CalledProcessError as e:
        raise ReshardBuildError(f"`{shlex.join(str(c) for c in cmd)}` failed with exit status {e.returncode}") from None


class CMakeBuild(build_ext):
    """Builds the CMake target reshard_python and copies the extension modules it made into the package."""

    def run(self):
        package_dir = self.cmake_build() / "python" / "reshard"
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        self.built = {}
        for name in MODULES:
            path = package_dir / f"{name}{suffix}"
            if path.exists():
                self.built[f"reshard.{name}"] = path
        if "reshard._core" not in self.built:
            found = sorted(p.name for p in package_dir.glob("_core*")) if package_dir.exists() else []
            raise ReshardBuildError(
                f"the build made no {package_dir / ('_core' + suffix)}"
                + (f" (it has {', '.join(found)}: built for another interpreter than {sys.executable};"
                   f" configure it with -DPython3_EXECUTABLE={sys.executable})" if found else
                   " (is pybind11 installed, and the interpreter's development files? the configure step says)"))
        self.extensions = [e for e in self.extensions if e.name in self.built]
        self.distribution.ext_modules = self.extensions
        super().run()

    def build_extension(self, ext):
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.built[ext.name], target)

    def cmake_build(self):
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        existing = os.environ.get("RESHARD_CMAKE_BUILD_DIR")
        if existing:
            build = pathlib.Path(existing).resolve()
            if not (build / "CMakeCache.txt").exists():
                raise ReshardBuildError(f"RESHARD_CMAKE_BUILD_DIR={existing} is not a configured CMake build tree")
            run("cmake", "--build", build, "--target", "reshard_python", "--parallel", jobs)
            return build
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        args = ["-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}", "-DRESHARD_PYTHON=ON",
                "-DRESHARD_BUILD_TESTS=OFF", "-DRESHARD_BUILD_BENCH=OFF", "-DRESHARD_BUILD_EXAMPLES=OFF"]
        nccl = os.environ.get("NCCL_HOME") or os.environ.get("NCCL_ROOT") or pytorch_nccl()
        if nccl:
            args.append(f"-DNCCL_ROOT={nccl}")
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        run("cmake", "-S", ROOT, "-B", build, *args)
        run("cmake", "--build", build, "--target", "reshard_python", "--parallel", jobs)
        return build


def build_base():
    """setuptools' working folder: inside the reused CMake tree, else build-python/ (not the CMake tree build/)."""
    existing = os.environ.get("RESHARD_CMAKE_BUILD_DIR")
    base = pathlib.Path(existing).resolve() / "pip" if existing else ROOT / "build-python"
    base.mkdir(parents=True, exist_ok=True)
    return str(base)


BASE = build_base()
setup(
    version=project_version(),
    ext_modules=[Extension(f"reshard.{name}", sources=[]) for name in MODULES],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": BASE}, "egg_info": {"egg_base": BASE}},
    zip_safe=False,
)
