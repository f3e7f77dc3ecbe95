#!/usr/bin/env python3
"""The examples of README.md, docs/cli.md and docs/cli-measure.md run as documented, and docs/api.md shows the example
programs as they are in examples/ (built and run as tests), so the docs cannot drift from the code.

Every fenced block of those files that shows a `reshard` command (or runs the Python package) is preceded by a
directive, an HTML comment the Markdown does not show:

  <!-- check: $ COMMAND -->     the block is COMMAND's output (a ```json block: the same JSON value)
  <!-- check: session -->       the block holds `$ COMMAND` lines (continued with a trailing `\\`), each followed by
                                its output
  <!-- check: synopsis -->      the block's usage lines: every --flag they name is in `reshard CMD --help`
  <!-- check: commands -->      every line is a command that starts its work: layout and plan finish (exit 0); run,
                                bench and calibrate, limited to one byte of memory (RESHARD_MEMORY_LIMIT_BYTES=1), stop
                                at their memory check after parsing every flag and planning, or, without the GPUs
                                they need, at that check (exit 2 either way)
  <!-- check: python -->        every `python -c` line runs with the installed package's interpreter and exits 0
  <!-- check: file PATH -->     the block is the file PATH of the repository, exactly
  <!-- check: skip REASON -->   not run here (e.g. it needs GPUs); the reason is required

Outputs compare line by line, whitespace-separated words, after the documented lines: a line `...` in the docs skips
any number of output lines. What is measured differs between runs and is not compared: in a table whose header names
`time(us)`, the columns time(us), graph(us), algbw, busbw and %bound; elsewhere the number after min, median, p90,
max, mean and algbw (estimates, byte counts, labels and verification counts are compared).

Usage: docs_examples_test.py RESHARD_CLI [PYTHON]   (PYTHON: an interpreter with the package installed; without
it, in builds without the Python package, the python blocks are skipped and say so)
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # the repository, from tests/repository
DOCS = ("README.md", "docs/cli.md", "docs/cli-measure.md", "docs/api.md")
DIRECTIVE = re.compile(r"^<!-- check(?::\s*(.*?))?\s*-->$")
COMMAND_LINE = re.compile(r"^(\$ )?([A-Z_]+=\S* )*(reshard|python3?) ")
MEASURED_COLUMNS = {"time(us)", "graph(us)", "algbw", "busbw", "%bound"}
MEASURED_WORDS = re.compile(r"\b(min|median|p90|max|mean|algbw) -?[0-9][0-9.]*")
NUMBER = re.compile(r"^-?[0-9][0-9.]*%?$")


def blocks(path):
    """(line number, directive or None, fence info, lines) of every fenced block of a Markdown file."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, info, start = fence.group(1), fence.group(2), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].strip())
            i += 1
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        m = DIRECTIVE.match(lines[k].strip()) if k >= 0 else None
        out.append((start + 1, (m.group(1) or "session") if m else None, info, body))
        i += 1
    return out


def masked(lines):
    """Each line's words with measured values replaced by '<measured>'."""
    out, columns = [], None
    for line in lines:
        words = line.split()
        if "time(us)" in words:  # a run/bench table header: '#', 'mesh', then one word per column
            columns = [w in MEASURED_COLUMNS for w in words[1:]]
            out.append(words)
            continue
        if columns and words and not line.startswith("#") and len(words) == len(columns):
            out.append(["<measured>" if m and NUMBER.match(w) else w for w, m in zip(words, columns)])
            continue
        out.append(MEASURED_WORDS.sub(lambda m: m.group(1) + " <measured>", line).split())
    return out


def compare(doc, got):
    """None when the documented lines match the output (with `...` skipping lines), else what differs."""
    doc_lines = list(doc)
    want, have = masked(doc_lines), masked(got.rstrip("\n").split("\n"))

    def match(i, j):
        while i < len(want):
            if want[i] == ["..."]:
                return any(match(i + 1, k) for k in range(j, len(have) + 1))
            if j >= len(have) or want[i] != have[j]:
                return False
            i, j = i + 1, j + 1
        return j == len(have)

    if match(0, 0):
        return None
    for i, (w, h) in enumerate(zip(want, have)):
        if w != h and w != ["..."]:
            return f"documented line {i + 1}:\n    docs: {doc_lines[i]}\n    tool: {got.split(chr(10))[i]}"
    return f"the docs show {len(want)} lines, the tool printed {len(have)}"


class Checker:
    def __init__(self, cli, python):
        self.cli, self.python = cli, python
        self.tmp = tempfile.mkdtemp(prefix="reshard_docs_")
        self.env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(cli)) + os.pathsep + os.environ["PATH"])
        self.env.pop("WORLD_SIZE", None)

    def shell(self, command, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        return subprocess.run(["bash", "-c", command], cwd=self.tmp, env=env, capture_output=True, text=True,
                              timeout=600)

    def output(self, command, doc, info):
        p = self.shell(command)
        if p.returncode != 0:
            return f"`{command}` exited {p.returncode}: {p.stderr.strip()}"
        if info == "json":
            return None if json.loads(p.stdout) == json.loads("\n".join(doc)) else "the JSON differs"
        return compare(doc, p.stdout)

    def session(self, body):
        problems, i = [], 0
        while i < len(body):
            if not body[i].startswith("$ "):
                return [f"line {i + 1} is neither a `$ command` nor its output"]
            command = body[i][2:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + body[i].strip()
            i += 1
            start = i
            while i < len(body) and not body[i].startswith("$ "):
                i += 1
            problem = self.output(command, body[start:i], "")
            if problem:
                problems.append(problem)
        return problems

    def synopsis(self, body):
        problems, command, help_text = [], None, ""
        for line in body:
            words = line.split()
            if words and words[0] == "reshard":
                command = words[1]
                help_text = self.shell(f"reshard {shlex.quote(command)} --help").stdout
            for flag in re.findall(r"(?<![\w-])(--[a-zA-Z][\w-]*)", line):
                if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text):
                    problems.append(f"reshard {command}: {flag} is not in its --help")
        return problems

    def commands(self, body):
        problems = []
        for line in body:
            command = re.split(r"\s{2,}#", line)[0].strip()
            if not command:
                continue
            name = command.split()[1]
            limited = name in ("run", "bench", "calibrate")
            p = self.shell(command, {"RESHARD_MEMORY_LIMIT_BYTES": "1"} if limited else None)
            stopped = p.returncode == 2 and re.search(r"needs \d+ bytes|GPUs?", p.stderr)
            if (limited and not stopped) or (not limited and p.returncode != 0):
                problems.append(f"`{command}` exited {p.returncode}: {p.stderr.strip()}")
        return problems

    def python_lines(self, body):
        if not self.python:
            print("python block skipped: no interpreter with the installed package (a build without it)")
            return []
        problems = []
        for line in body:
            words = shlex.split(line, comments=True)
            if len(words) >= 3 and re.match(r"python3?$", words[0]) and words[1] == "-c":
                p = subprocess.run([self.python, "-c", words[2]], cwd=self.tmp, capture_output=True, text=True)
                if p.returncode != 0:
                    problems.append(f"`{line}` exited {p.returncode}: {p.stderr.strip()}")
        return problems

    def check(self, directive, info, body):
        if directive == "session":
            return self.session(body)
        if directive == "synopsis":
            return self.synopsis(body)
        if directive == "commands":
            return self.commands(body)
        if directive == "python":
            return self.python_lines(body)
        if directive.startswith("file "):
            with open(os.path.join(ROOT, directive[5:].strip()), encoding="utf-8") as f:
                text = f.read()
            return [] if text == "\n".join(body) + "\n" else [f"the block differs from {directive[5:].strip()}"]
        if directive.startswith("skip"):
            return [] if directive[4:].strip() else ["a skip needs a reason"]
        if directive.startswith("$ "):
            problem = self.output(directive[2:], body, info)
            return [problem] if problem else []
        return [f"unknown directive '{directive}'"]


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().split("\n")[-2], file=sys.stderr)
        return 2
    checker = Checker(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
    failures, checked = [], 0
    for path in DOCS:
        for line, directive, info, body in blocks(path):
            shows_command = any(COMMAND_LINE.match(b) for b in body)
            if directive is None:
                if shows_command:
                    failures.append(f"{path}:{line}: a block with a command has no <!-- check: ... --> directive")
                continue
            checked += 1
            failures += [f"{path}:{line}: {p}" for p in checker.check(directive, info, body)]
    shutil.rmtree(checker.tmp, ignore_errors=True)
    for f in failures:
        print(f)
    print(f"docs_examples_test: {checked} blocks checked, {len(failures)} failures")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
