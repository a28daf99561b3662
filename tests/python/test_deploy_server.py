"""Checks of deploy/ against the real server: every metric the dashboard, rules, adapter and HPA
query exists in a scrape (so a renamed metric breaks CI, not production), and the release prefix
that the images ship runs on its own."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import deploy_promql
from deploy_support import ROOT, all_queries, contract_metrics, queried_metrics, rule_groups, scrape


INFER_TIMEOUT_S = 60
NUMPY_TYPES = {"FP32": "float32", "FP16": "float16", "FP64": "float64", "INT64": "int64", "INT32": "int32"}


def send_traffic(server, pb) -> int:
    """One good and one malformed request per model, so that the per-model counters, histograms
    and the failure counter have samples. Returns how many good requests succeeded."""
    import grpc

    rng = np.random.default_rng()
    served = 0
    with grpc.insecure_channel(server.grpc_address) as channel:
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        for model in sorted(p.name for p in server.repo.iterdir() if (p / "config.pbtxt").exists()):
            try:
                metadata = stub.ModelMetadata(pb.service.ModelMetadataRequest(name=model), timeout=INFER_TIMEOUT_S)
            except grpc.RpcError:
                continue  # the test repository holds deliberately broken models
            if any(t.datatype not in NUMPY_TYPES for t in metadata.inputs):
                continue
            request = pb.service.ModelInferRequest(model_name=model)
            for tensor in metadata.inputs:
                shape = [d if d > 0 else int(rng.integers(1, 4)) for d in tensor.shape]
                request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=shape)
                values = rng.standard_normal(shape).astype(NUMPY_TYPES[tensor.datatype])
                request.raw_input_contents.append(values.tobytes())
            try:
                stub.ModelInfer(request, timeout=INFER_TIMEOUT_S)
                served += 1
            except grpc.RpcError:
                pass  # e.g. a random batch above the model's maximum: the next model still counts
            del request.inputs[0]
            request.inputs.add(name="NO_SUCH_INPUT", datatype="FP32", shape=[1])
            with pytest.raises(grpc.RpcError):
                stub.ModelInfer(request, timeout=INFER_TIMEOUT_S)
    return served


def test_every_queried_metric_exists_in_a_real_scrape(ltserve_server, pb):
    assert send_traffic(ltserve_server, pb) >= 1, "no model answered an inference"
    samples, types = deploy_promql.parse_exposition(scrape(ltserve_server.http_port))
    exposed = set(samples) | set(types)
    recorded = {r["record"] for g in rule_groups() for r in g["rules"] if "record" in r}
    has_gpu = any(name.startswith("ltserve_gpu_") for name in samples)
    problems, checked = [], set()
    for where, names in queried_metrics().items():
        for name in names:
            if ":" in name:
                ok = name in recorded
            elif name in deploy_promql.SYNTHETIC_METRICS:
                ok = True
            elif name.startswith("ltserve_gpu_") and not has_gpu:
                # NVML metrics exist only with a GPU: hold them to the documented contract here.
                ok = name in contract_metrics()
                print(f"{name}: no GPU on this machine, checked against docs/architecture.md")
            else:
                ok = name in exposed
            checked.add(name)
            if not ok:
                problems.append(f"{where}: {name} is not exposed by ltserve")
        raw = [n for n in names if n in samples]
        if raw and where in all_queries():
            have = set().union(*(samples[n] for n in raw)) | deploy_promql.TARGET_LABELS
            missing = deploy_promql.label_names(all_queries()[where]) - have
            if missing:
                problems.append(f"{where}: labels {sorted(missing)} not on {sorted(raw)}")
    print(f"checked {len(checked)} metric names against the scrape")
    assert not problems, "\n".join(problems)


# --- the release prefix the images ship ---------------------------------------------------------

RELEASE_SERVER_TIMEOUT_S = 180  # libtorch's first load on a busy 2-core CI machine takes seconds


def wait_for_line(log: Path, pattern: str, process, timeout_s: float) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if match := re.search(pattern, log.read_text()):
            return match
        assert process.poll() is None, f"exited with {process.returncode}:\n{log.read_text()}"
        time.sleep(0.1)
    raise TimeoutError(f"no {pattern!r} within {timeout_s} s:\n{log.read_text()}")


def test_release_prefix_is_self_contained_and_serves(tmp_path, model_repo):
    """scripts/release-build.sh's install half on the binary CI already built (its build half is
    the ordinary CMake build, replaced here by a no-op `cmake` so CI compiles once); then the
    installed binary alone, as the image runs it, serves and drains."""
    from ltserve_testing import SERVER_BINARY

    build = tmp_path / "build"
    (build / "server" / "app").mkdir(parents=True)
    shutil.copy2(SERVER_BINARY, build / "server" / "app" / "ltserve")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cmake").write_text("#!/bin/sh\nexit 0\n")
    (fake / "cmake").chmod(0o755)
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "BUILD_DIR": str(build),
           "PYTHON": sys.executable}
    result = subprocess.run([str(ROOT / "scripts" / "release-build.sh"), str(prefix)],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

    binary = prefix / "bin" / "ltserve"
    assert "$ORIGIN/../lib" in subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True).stdout
    libraries = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    venv = str(Path(sys.executable).resolve().parents[1])
    assert "not found" not in libraries and venv not in libraries and str(ROOT) not in libraries, libraries
    assert re.search(r"libtorch_cpu\.so => " + re.escape(str(prefix / "lib")), libraries.replace("bin/../", ""))
    packages = (prefix / "share" / "ltserve" / "runtime-packages.txt").read_text().split()
    assert any(p.startswith("libgrpc++") for p in packages) and all("=" in p for p in packages)

    log = tmp_path / "server.log"
    with log.open("w") as sink:
        process = subprocess.Popen([str(binary), "--model-repository", str(model_repo), "--host", "127.0.0.1",
                                    "--grpc-port", "0", "--http-port", "0"],
                                   stdout=sink, stderr=subprocess.STDOUT, env={"PATH": "/usr/bin:/bin"})
    try:
        port = int(wait_for_line(log, r"listening: grpc=\S+ http=(\d+)", process, RELEASE_SERVER_TIMEOUT_S).group(1))
        ready = wait_for_line(log, r"ltserve ready=(\w+)", process, RELEASE_SERVER_TIMEOUT_S).group(1)
        # The image's HEALTHCHECK request (the test repository's broken models may keep it 503).
        try:
            status = urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=10).status
        except urllib.error.HTTPError as error:
            status = error.code
        assert status == (200 if ready == "true" else 503)
        assert "ltserve_build_info" in scrape(port)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=RELEASE_SERVER_TIMEOUT_S) == 0, log.read_text()
