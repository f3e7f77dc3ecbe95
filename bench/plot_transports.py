"""Bar chart of nccl p2p, nvlink p2p, auto and PyTorch per case, from one results folder.

    /usr/bin/python3 bench/plot_transports.py bench/results/2026-11-24-h200x2-session7 --out docs/img

Reads the folder's acceptance_bench.txt (rows of `reshard run`, one process per rank, as final.sh writes them) and
pytorch_same_run.txt (bench/pytorch_baseline.py's lines); plots the cases of at least 256 MiB. Needs matplotlib
(Debian python3-matplotlib).
"""

import argparse
import pathlib
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIN_BYTES = 256 << 20


def reshard_rows(path):
    """{(from, to, shape, dtype): {series: time_us}} from `reshard run` rows; auto is the row marked '*'."""
    out = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) < 9 or f[0] != "2" or "[in process" in line:
            continue
        frm, to, shape, dtype, strategy, nbytes, time_us = f[1], f[2], f[3], f[4], f[5], int(f[6]), float(f[7])
        if nbytes < MIN_BYTES:
            continue
        series = "auto" if strategy.endswith("*") else strategy
        out.setdefault((frm, to, shape, dtype), {})[series] = time_us
    return out


def pytorch_rows(path):
    out = {}
    pattern = re.compile(r"pytorch \[2\] (\S+)->(\S+) \[(\d+), (\d+)\] (\S+): ([\d.]+) us")
    for m in pattern.finditer(path.read_text()):
        frm, to, a, b, dtype, t = m.groups()
        out[(frm, to, f"{a}x{b}", dtype)] = float(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."))
    args = ap.parse_args()
    rows = reshard_rows(args.folder / "acceptance_bench.txt")
    torch_rows = pytorch_rows(args.folder / "pytorch_same_run.txt")
    cases = [k for k in rows if k in torch_rows]
    series = ["p2p/nccl", "p2p/nvlink", "auto", "PyTorch"]
    width = 0.2
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, name in enumerate(series):
        values = [torch_rows[k] if name == "PyTorch" else rows[k].get(name, 0.0) for k in cases]
        ax.bar([c + (i - 1.5) * width for c in range(len(cases))], values, width, label=name)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{f}→{t}\n{s} {d}" for f, t, s, d in cases], fontsize=8)
    ax.set_ylabel("time per call (µs, median)")
    ax.set_title("mesh (2), 2x H200, one process per rank: reshard vs PyTorch DTensor.redistribute", fontsize=10)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.legend(loc="upper center", ncol=4)
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "nvlink_vs_pytorch.png", dpi=110)
    print(f"wrote {args.out / 'nvlink_vs_pytorch.png'} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
