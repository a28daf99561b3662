"""Checks a running ltserve container from the host, as a client sees it: the gRPC health
service (what the Kubernetes probes ask), an inference of the demo MLP compared with torch on
the same TorchScript file, and /metrics. scripts/container-test.sh runs it once per image.

Usage: python scripts/container-check.py --grpc 127.0.0.1:PORT --http 127.0.0.1:PORT --repo DIR
Exit 0 when every check passed; otherwise prints what failed and exits 1.
"""
from __future__ import annotations

import argparse
import sys
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import torch
import tritonclient.grpc as grpcclient
from grpc_health.v1 import health_pb2, health_pb2_grpc

MODEL = "demo_mlp"
# The probes of deploy/k8s/base/deployment.yaml: "" (startup, liveness) and the inference
# service (readiness).
PROBED_SERVICES = ("", "inference.GRPCInferenceService")


def check_health(target: str) -> list[str]:
    failures = []
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in PROBED_SERVICES:
            try:
                status = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
            except grpc.RpcError as error:
                failures.append(f"health {service!r}: {error.code().name} {error.details()}")
                continue
            name = health_pb2.HealthCheckResponse.ServingStatus.Name(status)
            print(f"  grpc health {service or '(server)'!s}: {name}")
            if status != health_pb2.HealthCheckResponse.SERVING:
                failures.append(f"health {service!r} is {name}, not SERVING")
    return failures


def check_inference(target: str, repo: Path) -> list[str]:
    client = grpcclient.InferenceServerClient(url=target)
    x = np.random.default_rng(0).standard_normal((4, 128), dtype=np.float32)
    inp = grpcclient.InferInput("INPUT__0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    try:
        result = client.infer(MODEL, [inp], outputs=[grpcclient.InferRequestedOutput("OUTPUT__0")],
                              client_timeout=30)
    except Exception as error:  # tritonclient raises its own exception type
        return [f"inference of {MODEL} failed: {error}"]
    y = result.as_numpy("OUTPUT__0")
    with torch.no_grad():
        ref = torch.jit.load(str(repo / MODEL / "1" / "model.pt")).double()(torch.from_numpy(x).double()).numpy()
    if y is None or y.shape != ref.shape:
        return [f"inference of {MODEL}: shape {None if y is None else y.shape}, torch gives {ref.shape}"]
    error = float(np.abs(y - ref).max() / np.abs(ref).max())
    print(f"  inference {MODEL} {list(x.shape)}: max relative error against torch {error:.2e}")
    return [] if error < 1e-4 else [f"inference of {MODEL} differs from torch: max relative error {error:.2e}"]


def check_metrics(http: str) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError as error:
        return [f"/metrics: {error}"]
    wanted = ("ltserve_build_info", f'model="{MODEL}"')
    missing = [w for w in wanted if w not in text]
    print(f"  /metrics: {len(text.splitlines())} lines")
    return [f"/metrics lacks {m}" for m in missing]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--grpc", required=True)
    parser.add_argument("--http", required=True)
    parser.add_argument("--repo", required=True, type=Path)
    args = parser.parse_args()
    failures = check_health(args.grpc) + check_inference(args.grpc, args.repo) + check_metrics(args.http)
    for failure in failures:
        print(f"  FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
