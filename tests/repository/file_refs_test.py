#!/usr/bin/env python3
"""Every file a comment or a doc names is in the repository (issue 20): paths under the repository's own folders
(`planner/src/pricing/step_geometry.cpp`, `docs/transports.md`) and bare source names (`timed_rank.cpp`) resolve to a
tracked file, from the root, from the naming file's folder, or as a tail of a tracked path. #include lines, outputs
of bench/results/ and files of other projects (listed below) are not checked. Runs from the source tree (git
ls-files); skips (exit 0 with a note) where git or the checkout is missing."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository, from tests/repository
OTHER_PROJECTS = {"test_redistribute.py"}  # PyTorch's own tests, named as the source of a count
GENERATED = {"version.hpp", "reshardConfig.cmake", "-targets.cmake"}  # made by the configure step
NAME = re.compile(r"(?<![\w/.$-])((?:[\w.-]+/)*[\w-]+\.(?:cpp|hpp|cu|cuh|py|sh|md|cmake))\b")


def main():
    try:
        files = subprocess.check_output(["git", "-C", ROOT, "ls-files"], text=True, stderr=subprocess.DEVNULL).split()
    except (OSError, subprocess.CalledProcessError):
        print("file_refs_test: not a git checkout; skipped")
        return 0
    tracked = set(files)
    basenames = {os.path.basename(f) for f in files}
    folders = {f.split("/")[0] for f in files if "/" in f}
    missing = []
    for f in files:
        if f.startswith("bench/results/") or not f.endswith((".cpp", ".hpp", ".cu", ".cuh", ".py", ".sh", ".md",
                                                              ".txt", ".cmake")):
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("#include"):
                continue
            for m in NAME.finditer(line):
                ref = m.group(1)
                parts = ref.split("/")
                if os.path.basename(ref) in GENERATED | OTHER_PROJECTS:
                    continue
                if len(parts) > 1 and parts[0] not in folders and parts[0] not in ("reshard", "..", "."):
                    continue  # another project's path (nlohmann/json.hpp, CLI/CLI.hpp) or an output name
                here = os.path.normpath(os.path.join(os.path.dirname(f), ref))
                if ref in tracked or here in tracked or os.path.isdir(os.path.join(ROOT, ref)):
                    continue
                if len(parts) == 1 and ref in basenames:
                    continue
                if any(t.endswith("/" + ref) for t in tracked):
                    continue
                missing.append(f"{f}:{number}: names {ref}, which is not in the repository")
    for m in missing:
        print(m)
    print(f"file_refs_test: {len(files)} files, {len(missing)} names of missing files")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
