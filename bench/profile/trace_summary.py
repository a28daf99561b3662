"""Summarises request traces in Triton's JSON format (ltserve's or Triton's own --trace-config
files) as a markdown table: for each step between two consecutive timestamps of a request, the
median, p90 and p99 in microseconds, over every trace of a model.

Where the served path's microseconds go: ltserve stamps the handler's entry (GRPC_WAITREAD_END,
the request's bytes are in), the parsed request (REQUEST_START), the enqueue (QUEUE_START), the
batch's compute phases, the response message (REQUEST_END), its serialisation (GRPC_SEND_START)
and the end of the call (GRPC_SEND_END). What happens before the handler (reading the bytes off
the socket) and after the call (the client's own work) is not in any server's trace: it is the
gap between the client's latency and the row "handler entry to call done".

Usage: python3 bench/profile/trace_summary.py [--skip N] trace.json [trace.json.1 ...]
  --skip N: leave out each model's first N traces (warm-up).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import OrderedDict, defaultdict

# What each step is, by the two timestamps around it.
STEPS = {
    ("GRPC_WAITREAD_END", "REQUEST_START"): "parse the protobuf",
    ("HTTP_RECV_END", "REQUEST_START"): "parse the JSON / binary body",
    ("REQUEST_START", "QUEUE_START"): "find the model, decode and check the inputs",
    ("QUEUE_START", "COMPUTE_START"): "queue (and the batch window)",
    ("COMPUTE_START", "COMPUTE_INPUT_END"): "compute: stage the inputs, copy in",
    ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"): "compute: the forward pass",
    ("COMPUTE_OUTPUT_START", "COMPUTE_END"): "compute: copy out, host waits and returns",
    ("COMPUTE_END", "REQUEST_END"): "slice the outputs, statistics, build the response",
    ("REQUEST_END", "GRPC_SEND_START"): "serialise the response",
    ("REQUEST_END", "HTTP_SEND_START"): "encode the response",
    ("GRPC_SEND_START", "GRPC_SEND_END"): "gRPC sends it, the call completes",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def load(paths: list[str]) -> tuple[dict, dict]:
    """Per trace id: its model, and its timestamps {name: ns}."""
    models: dict[int, str] = {}
    stamps: dict[int, dict[str, int]] = defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for record in json.load(f):
                trace_id = record["id"]
                if "model_name" in record:
                    models[trace_id] = f'{record["model_name"]} ({record.get("model_version", "")})'
                for stamp in record.get("timestamps", []):
                    stamps[trace_id][stamp["name"]] = stamp["ns"]
    return models, stamps


def summarise(models: dict, stamps: dict, skip: int) -> str:
    by_model: dict[str, list[dict[str, int]]] = OrderedDict()
    for trace_id in sorted(stamps):
        by_model.setdefault(models.get(trace_id, "?"), []).append(stamps[trace_id])
    lines = []
    for model, traces in by_model.items():
        traces = traces[skip:]
        steps: dict[tuple[str, str], list[float]] = OrderedDict()
        totals: list[float] = []
        for trace in traces:
            ordered = sorted(trace.items(), key=lambda item: item[1])
            for (a, a_ns), (b, b_ns) in zip(ordered, ordered[1:]):
                steps.setdefault((a, b), []).append((b_ns - a_ns) / 1000)
            if len(ordered) >= 2:
                totals.append((ordered[-1][1] - ordered[0][1]) / 1000)
        lines.append(f"{model}: {len(traces)} traces")
        lines.append("")
        lines.append("| step | from | to | traces | p50 µs | p90 µs | p99 µs |")
        lines.append("|---|---|---|---:|---:|---:|---:|")
        for (a, b), values in steps.items():
            what = STEPS.get((a, b), "")
            lines.append(f"| {what} | {a} | {b} | {len(values)} | {statistics.median(values):.1f} "
                         f"| {percentile(values, 90):.1f} | {percentile(values, 99):.1f} |")
        if totals:
            lines.append(f"| handler entry to call done | first | last | {len(totals)} "
                         f"| {statistics.median(totals):.1f} | {percentile(totals, 90):.1f} "
                         f"| {percentile(totals, 99):.1f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", type=int, default=0, help="leave out each model's first N traces")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    models, stamps = load(args.files)
    if not stamps:
        print("no traces in " + ", ".join(args.files), file=sys.stderr)
        return 1
    print(summarise(models, stamps, args.skip))
    return 0


if __name__ == "__main__":
    sys.exit(main())
