#!/usr/bin/env python3
"""nvidia-smi samples (smi_RUN.csv, scripts/device/overlap_floor.sh) per row of the probe's table (RUN.txt), by the
row's wall-clock span (its last column, Unix seconds; nvidia-smi's timestamps are UTC on that machine, clock.txt).
A row's span holds its GEMM loops alone and beside the traffic, and the traffic alone.

    python3 smi_by_mode.py overlap_floor/main.txt overlap_floor/smi_main.csv
"""
import calendar
import sys
import time


def main(table, smi):
    samples = []
    for line in open(smi):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 7 or not f[1].isdigit():
            continue
        stamp, frac = f[0].split(".")
        t = calendar.timegm(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
        samples.append((t, int(f[1]), float(f[2].split()[0]), float(f[4].split()[0]), f[6]))
    print(f"{'mode':<20} {'GPU0 MHz':>9} {'GPU1 MHz':>9} {'GPU0 W':>7} {'GPU1 W':>7} {'cap 0x4':>8}  (medians; samples)")
    for line in open(table):
        parts = line.split()
        if len(parts) < 3 or line.startswith(("#", "==", "mode")) or "-" not in parts[-1]:
            continue
        try:
            t0, t1 = (float(x) for x in parts[-1].split("-"))
        except ValueError:
            continue
        inside = [s for s in samples if t0 <= s[0] <= t1]
        med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")
        clk = [med([s[2] for s in inside if s[1] == g]) for g in (0, 1)]
        pw = [med([s[3] for s in inside if s[1] == g]) for g in (0, 1)]
        cap = sum(1 for s in inside if int(s[4], 16) & 0x4)
        print(f"{parts[0]:<20} {clk[0]:9.0f} {clk[1]:9.0f} {pw[0]:7.0f} {pw[1]:7.0f} {cap:4d}/{len(inside):<3}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
