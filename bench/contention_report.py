#!/usr/bin/python3
"""Table and plot of redistributions beside a GEMM loop (docs/benchmarks.md, "Redistribution beside compute").

    /usr/bin/python3 bench/contention_report.py ROWS... [--out DIR] [--title TEXT]

ROWS: files of rows as `reshard contention --json` writes them ({"rows": [...]}), as bench/pytorch_contention.py writes
them (--out, the same form), or JSON lines of such rows (scripts/device/contention.sh's contention_rows.jsonl). Prints a
Markdown table (one line per row: GEMM and redistribution time alone and beside, both slowdowns, verification) and,
with --out, writes contention_slowdown.png: GEMM slowdown and redistribution slowdown against redistribution size, one
line per series (transport, eager or CUDA graph, low-SM auto, PyTorch). Needs matplotlib for the plot (Debian:
python3-matplotlib). Rows with wrong elements are listed but never plotted.
"""
import argparse
import collections
import json
import os
import sys

MiB = 1 << 20


def load_rows(paths):
    rows = []
    for path in paths:
        text = open(path).read()
        try:
            doc = json.loads(text)
            rows += doc if isinstance(doc, list) else doc["rows"] if "rows" in doc else [doc]  # one row: JSON lines
        except ValueError:  # JSON lines
            rows += [json.loads(line) for line in text.splitlines() if line.strip()]
    for r in rows:
        for key in ("gemm_alone_us", "gemm_beside_us", "redistribution_alone_us", "redistribution_beside_us"):
            if not isinstance(r.get(key), (int, float)):
                sys.exit(f"contention_report.py: a row lacks '{key}': {json.dumps(r)[:200]}")
    return rows


def series(r):
    if r.get("strategy") == "pytorch":
        return "PyTorch redistribute"
    name = f"{r.get('strategy')}/{r.get('transport')}"
    if r.get("low_sm"):
        name += " (low-SM auto)"
    return name + (", CUDA graph" if r.get("cuda_graph") else ", eager")


def size_bytes(r):
    if r.get("tensor_bytes"):
        return int(r["tensor_bytes"])
    n = 1
    for d in str(r["shape"]).split("x"):
        n *= int(d)
    return n * {"f64": 8, "f32": 4, "bf16": 2, "f16": 2}.get(r.get("dtype"), 4)


def table(rows):
    out = ["| series | case | GEMM alone (µs) | GEMM beside | GEMM slowdown | redistribution alone (µs) | beside | "
           "redistribution slowdown | redistributions / GEMMs per loop | verified |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: (series(r), size_bytes(r))):
        case = f"{r['from']}→{r['to']} {r['shape']} {r['dtype']} ({size_bytes(r) / MiB:.0f} MiB), mesh ({r['mesh']})"
        verified = "all correct" if r.get("wrong") == 0 else f"{r.get('wrong')} WRONG"
        out.append(f"| {series(r)} | {case} | {r['gemm_alone_us']:.1f} | {r['gemm_beside_us']:.1f} | "
                   f"{100 * r['gemm_slowdown']:+.1f}% | {r['redistribution_alone_us']:.1f} | "
                   f"{r['redistribution_beside_us']:.1f} | {100 * r['redistribution_slowdown']:+.1f}% | "
                   f"{r['redistributions_per_loop']} / {r['gemms_per_loop']} | {verified} (of {r.get('checked')}) |")
    return "\n".join(out)


def plot(rows, path, title):
    try:
        import matplotlib
    except ImportError:
        sys.exit("contention_report.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by_series = collections.defaultdict(list)
    for r in rows:
        if r.get("wrong") == 0:
            by_series[series(r)].append(r)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, what in ((axes[0], "gemm_slowdown", "GEMM slowdown"),
                          (axes[1], "redistribution_slowdown", "redistribution slowdown")):
        for name, rs in sorted(by_series.items()):
            rs = sorted(rs, key=size_bytes)
            ax.plot([size_bytes(r) / MiB for r in rs], [100 * r[key] for r in rs], marker="o",
                    linestyle="--" if "graph" in name else "-", label=name)
        ax.set_xscale("log", base=2)
        sizes = sorted({size_bytes(r) / MiB for rs in by_series.values() for r in rs})
        ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
        ax.set_xlabel("redistribution size (MiB, whole tensor)")
        ax.set_ylabel(f"{what} (%: beside / alone - 1)")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(what)
        ax.grid(True, alpha=0.3)
    gemms = sorted({r.get("gemm", "") for r in rows})
    fig.suptitle(title or f"Redistribution beside GEMM {', '.join(gemms)}: medians of the slowest rank")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv):
    ap = argparse.ArgumentParser(prog="contention_report.py", description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+", help="reshard contention --json / pytorch_contention.py --out files, or JSON lines")
    ap.add_argument("--out", help="folder for contention_slowdown.png")
    ap.add_argument("--title")
    a = ap.parse_args(argv[1:])
    rows = load_rows(a.rows)
    print(table(rows))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        path = os.path.join(a.out, "contention_slowdown.png")
        plot(rows, path, a.title)
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
