#!/usr/bin/env python3
"""Which instructions of a kernel waste memory traffic, from Nsight Compute's source page.

Nsight Compute's SourceCounters section counts, per SASS instruction, the L2 sectors a global
access needed beyond the ideal for its addresses ("L2 Theoretical Sectors Global Excessive")
and the shared-memory wavefronts beyond the ideal ("L1 Wavefronts Shared Excessive"). The
section's summary gives only the kernel's totals; this prints the totals and every instruction
with any excess, largest first, with its executions and its actual and ideal counts per warp
instruction, so that a figure like "29 % of the sectors excessive" points at a line of code.

Usage: ncu --import REPORT.ncu-rep --page source --csv --print-source sass > src.csv
       python3 bench/profile/ncu_excess.py src.csv
(scripts/gpu.sh does both for the attention kernel with RUN_ATTENTION_SOURCE=1.)
"""
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main(path):
    rows = list(csv.reader(open(path, errors="replace")))
    header_at = next((i for i, row in enumerate(rows) if "Source" in row), None)
    if header_at is None:
        print(f"{path}: no source table (was the report collected with SourceCounters?)")
        return 1
    header = rows[header_at]
    column = {name: i for i, name in enumerate(header)}
    kinds = [("L2 Theoretical Sectors Global", "L2 sectors"), ("L1 Wavefronts Shared", "shared wavefronts")]
    kinds = [(name, label) for name, label in kinds if name + " Excessive" in column]
    totals = {name: [0.0, 0.0] for name, _ in kinds}  # excessive, all
    lines = []
    for row in rows[header_at + 1:]:
        if len(row) < len(header):
            continue
        executed = number(row[column["Instructions Executed"]]) if "Instructions Executed" in column else 0.0
        cells = []
        excess = 0.0
        for name, label in kinds:
            extra = number(row[column[name + " Excessive"]])
            actual = number(row[column[name]])
            ideal = number(row[column[name + " Ideal"]]) if name + " Ideal" in column else actual - extra
            totals[name][0] += extra
            totals[name][1] += actual
            excess += extra
            if executed > 0:
                cells.append(f"{label} {actual / executed:.1f} a warp instruction (ideal {ideal / executed:.1f})")
        if excess > 0:
            address = row[column["Address"]] if "Address" in column else ""
            lines.append((excess, address, row[column["Source"]].strip(), int(executed), cells))
    for name, label in kinds:
        extra, actual = totals[name]
        share = 100.0 * extra / actual if actual else 0.0
        print(f"{label}: {extra:,.0f} excessive of {actual:,.0f} ({share:.0f} %)")
    print(f"{len(lines)} instructions with any excess, largest first:")
    for _, address, source, executed, cells in sorted(lines, key=lambda line: -line[0]):
        print(f"  {address} {source[:60]:<60} executed {executed:,}; " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else print(__doc__) or 2)
