"""Prints an Nsight Compute CSV (ncu --csv --print-units base, any --metrics) as a markdown
table: one row per profiled launch, in launch order, with the kernel's short name and each
metric as a column. For the few-launch profiles of one kernel (scripts/gpu.sh RUN_ATTENTION),
where ncu_summary.py's per-pass aggregation has nothing to aggregate.

Usage: python3 bench/profile/ncu_metrics.py ncu.csv
"""
from __future__ import annotations

import csv
import re
import sys


def short_name(kernel: str) -> str:
    """`void ns::Kernel<T, 64>(args)` -> `Kernel<T, 64>`."""
    name = re.sub(r"\(.*\)$", "", kernel).removeprefix("void ").strip()
    return name.split("::")[-1] if "<" not in name else re.sub(r"^.*::(?=[^:<]*<)", "", name)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], newline="") as f:
        lines = f.readlines()
    # ncu prints its own lines (==PROF==, the program's output) before the CSV header.
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        print(f"{sys.argv[1]}: no ncu CSV header found", file=sys.stderr)
        return 1
    launches: dict[int, dict[str, str]] = {}
    names: dict[int, str] = {}
    metrics: list[str] = []
    for row in csv.DictReader(lines[start:]):
        launch = int(row["ID"])
        names[launch] = short_name(row["Kernel Name"])
        metric = row["Metric Name"]
        if metric not in metrics:
            metrics.append(metric)
        launches.setdefault(launch, {})[metric] = row["Metric Value"]
    print("| launch | kernel | " + " | ".join(metrics) + " |")
    print("|---:|---|" + "---:|" * len(metrics))
    for launch in sorted(launches):
        values = [launches[launch].get(m, "") for m in metrics]
        print(f"| {launch} | {names[launch]} | " + " | ".join(values) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
