#!/usr/bin/env python3
"""Where each profiled kernel waits for and releases the kernels around it, from its SASS.

Programmatic dependent launch lets a kernel start before the one ahead of it ends; it is safe
only if the kernel executes griddepcontrol.wait (SASS ACQBULK) before it reads anything the
kernel ahead writes, and it lets the kernel after it start early only if it executes
griddepcontrol.launch_dependents (SASS PREEXIT). For kernels whose code is not in a library's
fatbin under their names (cuBLASLt's nvjet kernels: the library holds only the pattern their
names are formatted from), Nsight Compute's source page is where the SASS can be read. This prints, per kernel: its instruction count, the index of the
first ACQBULK and PREEXIT, and the global and tensor-memory loads that come before the first
ACQBULK in program order (a straight reading of the listing, not of its branches).

Usage: ncu --import REPORT.ncu-rep --page source --print-source sass > kernels.sass
       python3 bench/profile/sass_pdl.py kernels.sass
(scripts/gpu.sh does both with RUN_CUBLASLT_SASS=1.)
"""
import re
import sys

# Nsight Compute's text source page: a "Kernel Name  <name>" line before each kernel's table,
# whose rows start with the instruction's address and then its opcode (optionally predicated).
HEADER = re.compile(r"^Kernel Name\s+(\S.*?)\s*$")
OPCODE = re.compile(r"^0x[0-9a-f]+\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
LOADS = ("LDG", "UTMALDG", "UBLKCP", "LDGSTS", "UTMAPF", "LDGDEPBAR", "UBLKPF")


def summarize(name, opcodes):
    first = {op: next((i for i, o in enumerate(opcodes) if o.split(".")[0] == op), None)
             for op in ("ACQBULK", "PREEXIT")}
    wait = first["ACQBULK"]
    before = sorted({o for o in opcodes[: wait if wait is not None else len(opcodes)]
                     if o.split(".")[0] in LOADS})
    print(f"{name[:110]}\n  instructions {len(opcodes)}; first ACQBULK (wait) at "
          f"{wait if wait is not None else 'none'}, first PREEXIT (release) at "
          f"{first['PREEXIT'] if first['PREEXIT'] is not None else 'none'}; "
          f"loads before the wait: {', '.join(before) if before else 'none'}")


def main(path):
    kernels = []
    for line in open(path, errors="replace"):
        header = HEADER.match(line)
        if header:
            kernels.append((header.group(1), []))
            continue
        if not kernels:
            continue
        match = OPCODE.search(line)
        if match:
            kernels[-1][1].append(match.group(1))
    if not kernels:
        print(f"{path}: no kernel found (was it printed with --page source --print-source sass?)")
        return 1
    seen = set()
    for name, opcodes in kernels:
        if (name, len(opcodes)) in seen:
            continue
        seen.add((name, len(opcodes)))
        summarize(name, opcodes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
