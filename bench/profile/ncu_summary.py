"""Summarises an Nsight Compute CSV of one forward pass (ncu --csv --print-units base, the metrics
scripts/gpu.sh asks for) as a markdown table: per kernel (name and grid), how many launches, their
device time, DRAM bytes, achieved bandwidth, SM and DRAM throughput against peak, achieved
occupancy, and what bounds it.

A kernel is called bandwidth-bound when its DRAM throughput is at least 60 % of peak,
compute-bound when its SM throughput is, and latency-bound otherwise: too little work in flight
(few CTAs, a short body, ramp-up and tail) to load either unit.

Usage: python3 bench/profile/ncu_summary.py ncu.csv [passes]
  passes: how many forward passes the CSV holds (ltserve_gpu_encoder_bench --profile replays the
  graph twice: a warm-up replay, then the timed one); launches and totals are given per pass.
Under ncu each kernel runs alone with its caches flushed, so the per-pass sum is an upper bound
on the graph's own time (ltserve_gpu_encoder_bench's table), not the same quantity.
"""
from __future__ import annotations

import csv
import re
import sys
from collections import OrderedDict

TIME = "gpu__time_duration.sum"
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
BOUND_PCT = 60.0


def short_name(name: str) -> str:
    """The function's name without its arguments, namespaces or most template arguments."""
    name = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in name:  # drop template argument lists
        if ch == "<":
            depth += 1
        elif ch == ">":
            # ncu writes "(anonymous namespace)" as "unnamed>" in some names: a ">" with no "<"
            # before it must not open a list that never closes.
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    name = name.split("::")[-1].split(" ")[-1]
    return name[:60]


def number(text: str) -> float:
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return float("nan")


def read(path: str) -> list[dict]:
    kernels: OrderedDict[str, dict] = OrderedDict()
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own lines before the CSV
    for row in csv.DictReader(lines):
        k = kernels.setdefault(row["ID"], {"name": short_name(row["Kernel Name"]),
                                           "grid": row.get("Grid Size", ""),
                                           "block": row.get("Block Size", "")})
        k[row["Metric Name"]] = number(row["Metric Value"])
    return list(kernels.values())


def verdict(k: dict) -> str:
    if k.get(DRAM_PCT, 0) >= BOUND_PCT:
        return "bandwidth"
    if k.get(SM_PCT, 0) >= BOUND_PCT:
        return "compute"
    return "latency"


def main() -> int:
    kernels = read(sys.argv[1])
    passes = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    groups: OrderedDict[tuple, list[dict]] = OrderedDict()
    for k in kernels:
        groups.setdefault((k["name"], k["grid"], k["block"]), []).append(k)
    total_ns = sum(k.get(TIME, 0) for k in kernels) / passes
    print("| kernel | grid | block | launches a pass | µs each | µs a pass | % of kernel time | MB each | GB/s "
          "| DRAM % peak | SM % peak | occupancy % | bound |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (name, grid, block), ks in sorted(groups.items(), key=lambda g: -sum(k.get(TIME, 0) for k in g[1])):
        mean = lambda m: sum(k.get(m, 0) for k in ks) / len(ks)  # noqa: E731
        n = len(ks) / passes
        ns = mean(TIME)
        nbytes = mean(READ) + mean(WRITE)
        print(f"| {name} | {grid} | {block} | {n:g} | {ns / 1e3:.2f} | {ns * n / 1e3:.1f} "
              f"| {100 * ns * n / total_ns:.1f} | {nbytes / 1e6:.2f} | {nbytes / ns if ns else 0:.0f} "
              f"| {mean(DRAM_PCT):.0f} | {mean(SM_PCT):.0f} | {mean(OCCUPANCY):.0f} | {verdict(ks[0])} |")
    counts = OrderedDict()
    for k in kernels:
        counts[verdict(k)] = counts.get(verdict(k), 0) + k.get(TIME, 0) / passes
    print()
    print(f"{len(kernels) / passes:g} kernels a pass, {total_ns / 1e3:.1f} µs of kernel time a pass "
          f"under ncu (each kernel alone, caches flushed); by bound: " +
          ", ".join(f"{v} {t / 1e3:.1f} µs" for v, t in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
