import csv, json, sys, statistics as st
d = sys.argv[1]
py = {}
for f in ("pytorch_2.json", "pytorch_4.json"):
    for p in json.load(open(f"{d}/{f}")):
        mesh = "x".join(map(str, p["mesh"]))
        py[(mesh, p["from"], p["to"], "x".join(map(str, p["global_shape"])))] = p["median_us"]
allrows = []
for m in sys.argv[2:]:
    rows = [r for r in csv.DictReader(open(f"{d}/small_{m}.csv")) if r["auto_choice"] == "1"]
    print(f"== mesh {m}")
    for r in rows:
        mesh = r["mesh"].replace(",", "x")
        pt = py.get((mesh, r["from"], r["to"], r["shape"]))
        r["pt"] = pt
        e = float(r["median_us"]); g = float(r["graph_us"] or "nan")
        if "-v" in sys.argv[1:2]: pass
        print(f'{mesh:>4} {r["from"]:>6}->{r["to"]:<6} {r["shape"]:>10} {r["strategy"]+"/"+r["transport"]:>16} eager {e:6.1f} graph {g:6.1f} torch {pt if pt is None else round(pt,1)} x{(pt or 0)/e:5.1f}')
    for label, sel in [("changing", [r for r in rows if r["from"] != r["to"]]), ("all", rows)]:
        e = [float(r["median_us"]) for r in sel]; g = [float(r["graph_us"]) for r in sel]
        x = [r["pt"] / float(r["median_us"]) for r in sel if r["pt"]]
        print(f"  {label}: n={len(sel)} eager median {st.median(e):.1f} worst {max(e):.1f}; graph median {st.median(g):.1f} worst {max(g):.1f}; vs PyTorch lowest {min(x):.1f}x median {st.median(x):.1f}x, below 15x: {sum(1 for v in x if v < 15)}")
