#!/usr/bin/env python3
"""auto's measured time against the fastest measured candidate, per case of `reshard bench` sweeps.

    python3 auto_vs_fastest.py SWEEP.csv [SWEEP.csv ...]

A case is (mesh, from, to, shape, dtype); its candidates are the sweep's rows (every strategy and transport), auto's
the row marked auto_choice = 1. Per sweep: the mean and the worst of auto's median_us / the fastest candidate's
median_us over the cases, the fastest taken two ways:
  - "over all sweeps": the fastest row of the case in any of the sweeps given (a profile also shapes the candidates'
    plans, e.g. whether nvlink steps are fused, so a sweep's own candidates can all be slow); this is how
    bench/results/2026-11-26-h100x2-session12/calibrate/auto_choices.md and docs/benchmarks.md compare profiles
    (auto 1.083x with the old built-in, 1.028x calibrated);
  - "within the sweep": the fastest of that sweep's own rows;
and how many cases auto missed it; then the same over the cases that communicate (from != to: R->R, S0->S0 and
S1->S1 are one local copy or none whatever the strategy). With two or more sweeps: the cases where auto's pick (strategy/transport) differs
between the first sweep and each other one.
"""
import csv
import sys


def load(path):
    cases = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["mesh"], r["from"], r["to"], r["shape"], r["dtype"])
            cases.setdefault(key, []).append(r)
    return cases


def name(r):
    return f"{r['strategy']}/{r['transport']}"


def summarise(path, cases, best_all):
    ratios, own, picks = [], [], {}
    for key, rows in cases.items():
        autos = [r for r in rows if r["auto_choice"] == "1"]
        if len(autos) != 1:
            print(f"{path}: {key}: {len(autos)} rows marked auto, skipped")
            continue
        auto = autos[0]
        fastest = min(rows, key=lambda r: float(r["median_us"]))
        own.append(float(auto["median_us"]) / float(fastest["median_us"]))
        fastest = best_all[key]
        ratio = float(auto["median_us"]) / float(fastest["median_us"])
        ratios.append((ratio, key, auto, fastest))
        picks[key] = name(auto)
    wrong = sum(int(r["wrong"] or 0) for rows in cases.values() for r in rows)
    runs = sum(len(rows) for rows in cases.values())
    mean = sum(r[0] for r in ratios) / len(ratios)
    worst = max(ratios, key=lambda r: r[0])
    missed = sum(1 for r in ratios if r[0] > 1.0)
    print(f"{path}: {len(ratios)} cases, {runs} runs, {wrong} wrong elements")
    print(f"  auto / fastest within the sweep: mean {sum(own) / len(own):.3f}x, worst {max(own):.3f}x, "
          f"auto not the fastest in {sum(1 for x in own if x > 1.0)} cases")
    print(f"  auto / fastest over all sweeps: mean {mean:.3f}x, worst {worst[0]:.3f}x "
          f"({worst[1][1]}->{worst[1][2]} {worst[1][3]}: auto {name(worst[2])} {float(worst[2]['median_us']):.1f} us, "
          f"fastest {name(worst[3])} {float(worst[3]['median_us']):.1f} us); auto not the fastest in {missed} cases")
    comm = [(x, r[0]) for x, r in zip(own, ratios) if r[1][1] != r[1][2]]
    if comm:
        print(f"  cases that communicate ({len(comm)}): within the sweep mean {sum(c[0] for c in comm) / len(comm):.3f}x "
              f"worst {max(c[0] for c in comm):.3f}x; over all sweeps mean {sum(c[1] for c in comm) / len(comm):.3f}x "
              f"worst {max(c[1] for c in comm):.3f}x")
    for ratio, key, auto, fastest in sorted(ratios, key=lambda r: -r[0])[:5]:
        print(f"    {ratio:.3f}x  {key[1]}->{key[2]} {key[3]}: auto {name(auto)} {float(auto['median_us']):.1f} us, "
              f"fastest {name(fastest)} {float(fastest['median_us']):.1f} us")
    return picks


def main(paths):
    if not paths:
        sys.exit(__doc__)
    sweeps = [load(p) for p in paths]
    best_all = {}
    for cases in sweeps:
        for key, rows in cases.items():
            for r in rows:
                if key not in best_all or float(r["median_us"]) < float(best_all[key]["median_us"]):
                    best_all[key] = r
    picks = [summarise(p, cases, best_all) for p, cases in zip(paths, sweeps)]
    for p, other in zip(paths[1:], picks[1:]):
        differ = [k for k in picks[0] if k in other and picks[0][k] != other[k]]
        print(f"auto's pick differs between {paths[0]} and {p} in {len(differ)} of {len(picks[0])} cases")
        for k in differ:
            print(f"    {k[1]}->{k[2]} {k[3]}: {picks[0][k]} / {other[k]}")


if __name__ == "__main__":
    main(sys.argv[1:])
