#!/usr/bin/env python3
"""ltserve-bench and Triton's perf_analyzer on the same server, level by level.

Runs both at each concurrency (one after the other, same windows and stability rule) and prints
a Markdown table of throughput and latency with the relative difference, ready to paste into a
results file. Exits 1 when any level's throughputs differ by more than --max-diff-pct.

  client/bench/consistency.py -u 127.0.0.1:8001 -m demo_mlp --concurrency 1,4,16 \
      --bench build/client/bench/ltserve-bench
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def perf_analyzer_env() -> dict[str, str]:
    """perf_analyzer from the tritonclient wheel links CUDA 12's libcudart (no GPU needed)."""
    env = dict(os.environ)
    try:
        import nvidia.cuda_runtime as cudart
        dirs = [str(Path(p) / "lib") for p in cudart.__path__]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + [env.get("LD_LIBRARY_PATH", "")])
    except ImportError:
        pass
    return env


def run_perf_analyzer(args, concurrency: int, workdir: Path) -> dict | None:
    """None when perf_analyzer found no stable windows (it says so and exits non-zero)."""
    out = workdir / f"pa_{concurrency}.csv"
    run = subprocess.run(
        [args.perf_analyzer, "-m", args.model, "-u", args.url, "-i", "grpc", "-b", str(args.batch),
         "--concurrency-range", str(concurrency), "--measurement-interval", str(args.window_ms),
         "--stability-percentage", str(args.stability_pct), "--max-trials", str(args.max_windows),
         "-f", str(out)],
        env=perf_analyzer_env(), capture_output=True, text=True)
    if run.returncode != 0:
        print(f"perf_analyzer at concurrency {concurrency}: {run.stderr.strip() or run.stdout[-500:]}",
              file=sys.stderr)
        return None
    row = next(csv.DictReader(out.open()))
    return {"throughput": float(row["Inferences/Second"]), "p50_us": float(row["p50 latency"]),
            "p99_us": float(row["p99 latency"])}


def run_bench(args, concurrency: int, workdir: Path) -> dict:
    out = workdir / f"bench_{concurrency}.json"
    subprocess.run(
        [args.bench, "-m", args.model, "-u", args.url, "-b", str(args.batch), "--concurrency",
         str(concurrency), "--window-ms", str(args.window_ms), "--stability-pct", str(args.stability_pct),
         "--max-windows", str(args.max_windows), "--json", str(out), "-q"],
        check=True, stdout=subprocess.DEVNULL)
    level = json.loads(out.read_text())["levels"][0]
    return {"throughput": level["throughput_infer_per_s"], "p50_us": level["latency_us"]["p50"],
            "p99_us": level["latency_us"]["p99"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-u", "--url", default="127.0.0.1:8001")
    parser.add_argument("-m", "--model", default="demo_mlp")
    parser.add_argument("-b", "--batch", type=int, default=1)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--stability-pct", type=float, default=10)
    parser.add_argument("--max-windows", type=int, default=10)
    parser.add_argument("--max-diff-pct", type=float, default=10)
    parser.add_argument("--bench", default="build/client/bench/ltserve-bench")
    parser.add_argument("--perf-analyzer", default=str(Path(sys.executable).parent / "perf_analyzer"))
    args = parser.parse_args()
    if not Path(args.perf_analyzer).exists() and not shutil.which(args.perf_analyzer):
        print(f"perf_analyzer not found at {args.perf_analyzer}", file=sys.stderr)
        return 2

    print(f"| concurrency | ltserve-bench infer/s | perf_analyzer infer/s | difference | "
          f"p50 us (bench / PA) | p99 us (bench / PA) |")
    print("|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            bench = run_bench(args, concurrency, Path(tmp))
            pa = run_perf_analyzer(args, concurrency, Path(tmp))
            if pa is None:
                worst = float("inf")
                print(f"| {concurrency} | {bench['throughput']:.1f} | no stable measurement | | | |", flush=True)
                continue
            diff = 100.0 * (bench["throughput"] - pa["throughput"]) / pa["throughput"]
            worst = max(worst, abs(diff))
            print(f"| {concurrency} | {bench['throughput']:.1f} | {pa['throughput']:.1f} | {diff:+.1f}% | "
                  f"{bench['p50_us']:.0f} / {pa['p50_us']:.0f} | {bench['p99_us']:.0f} / {pa['p99_us']:.0f} |",
                  flush=True)
    return 0 if worst <= args.max_diff_pct else 1


if __name__ == "__main__":
    sys.exit(main())
