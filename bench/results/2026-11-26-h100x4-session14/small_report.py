"""Issue 14's figures from scripts/device/small_modes.sh's archive: auto's row per case, threads and processes.

    python3 small_report.py DIR > DIR/report.txt

Per mesh and mode: the changing pairs' eager median and worst, the graph median, the lowest speedup over PyTorch
(PyTorch's median / reshard's eager median), and the identity pairs (run in place) likewise; the cases over 30 us
eager with their host issue time per call (issue_us: the host's enqueue time, near the eager time when launch-bound).
"""
import csv
import json
import statistics as st
import sys

d = sys.argv[1]
py = {}
for f in ("pytorch_2.json", "pytorch_4.json"):
    try:
        for p in json.load(open(f"{d}/{f}")):
            key = ("x".join(map(str, p["mesh"])), p["from"], p["to"], "x".join(map(str, p["global_shape"])))
            py[key] = p["median_us"]
    except FileNotFoundError:
        print(f"(no {f})")


def rows(path, mesh):
    try:
        out = [r for r in csv.DictReader(open(path)) if r["auto_choice"] == "1" and r["mesh"].replace(",", "x") == mesh]
    except FileNotFoundError:
        return []
    for r in out:
        r["pt"] = py.get((mesh, r["from"], r["to"], r["shape"]))
    return out


def num(v):
    return float(v) if v not in ("", None) else float("nan")


for mesh in ("2", "4", "2x2"):
    n = 2 if mesh == "2" else 4
    for mode, path in (("threads", f"{d}/small_{mesh}.csv"), ("processes", f"{d}/proc_{n}.csv")):
        sel = rows(path, mesh)
        if not sel:
            print(f"== mesh {mesh} {mode}: no rows")
            continue
        print(f"== mesh {mesh} {mode}")
        for label, part in (("changing", [r for r in sel if r["from"] != r["to"]]),
                            ("identity", [r for r in sel if r["from"] == r["to"]])):
            e = [num(r["median_us"]) for r in part]
            g = [num(r["graph_us"]) for r in part if r["graph_us"]]
            x = [r["pt"] / num(r["median_us"]) for r in part if r["pt"]]
            worst = max(part, key=lambda r: num(r["median_us"]))
            print(f"  {label}: n={len(part)} eager median {st.median(e):.1f} worst {max(e):.1f} "
                  f"({worst['from']}->{worst['to']} {worst['shape']} {worst['strategy']}/{worst['transport']}, issue "
                  f"{worst.get('issue_us') or '-'}); graph median {st.median(g) if g else float('nan'):.1f}; "
                  f"vs PyTorch lowest {min(x) if x else float('nan'):.1f}x median {st.median(x) if x else float('nan'):.1f}x, "
                  f"below 15x: {sum(1 for v in x if v < 15)}, wrong {sum(int(r['wrong']) for r in part)}")
        issue = [num(r["issue_us"]) for r in sel if r.get("issue_us")]
        if issue:
            print(f"  host issue time per call: median {st.median(issue):.1f} us, max {max(issue):.1f}")
        for r in sel:
            if num(r["median_us"]) > 30:
                print(f"  slow: {r['from']}->{r['to']} {r['shape']} {r['strategy']}/{r['transport']} eager "
                      f"{r['median_us']} graph {r['graph_us']} issue {r.get('issue_us')}")
