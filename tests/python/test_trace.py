"""Request tracing (--trace-config, Triton's TIMESTAMPS level) on the real server: every sampled
request's trace is in the file at shutdown, in Triton's layout, its timestamps in the order the
request passed them, over gRPC (unary and stream) and HTTP; sampling and count hold; bad flags
stop the server with a message; bench/profile/trace_summary.py reads the file."""
from __future__ import annotations

import http.client
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from ltserve_testing import ROOT, SERVER_BINARY, start_server
from test_server import DEMO, DEMO_IN, FP32_RTOL, infer_request, output_array, reference, rel_err

CALL_TIMEOUT_S = 30.0
# Upper bound for the tracer's thread to write a file on a loaded machine; reached only on failure.
WRITE_PATIENCE_S = 10.0

GRPC_ORDER = ["GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
              "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END",
              "GRPC_SEND_START", "GRPC_SEND_END"]
HTTP_ORDER = ["HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
              "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END",
              "HTTP_SEND_START"]
STREAM_ORDER = GRPC_ORDER[:-1]  # a stream's call does not end with each response


def read_traces(path: Path) -> dict[int, dict]:
    """Per id: the model record merged with its timestamps, in the file's order."""
    traces: dict[int, dict] = {}
    for record in json.loads(path.read_text()):
        trace = traces.setdefault(record["id"], {"timestamps": []})
        trace["timestamps"] += record.pop("timestamps", [])
        trace.update(record)
    return traces


def complete_trace_file(path: Path, traces: int) -> bool:
    """Whether `path` holds `traces` whole traces (it may be missing or half-written)."""
    try:
        return len(read_traces(path)) == traces
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def names_in_time_order(trace: dict) -> list[str]:
    stamps = trace["timestamps"]
    assert [s["ns"] for s in stamps] == sorted(s["ns"] for s in stamps), stamps
    return [s["name"] for s in stamps]


def http_infer(port: int, x: np.ndarray, request_id: str) -> np.ndarray:
    body = json.dumps({"id": request_id, "inputs": [
        {"name": "INPUT__0", "shape": list(x.shape), "datatype": "FP32",
         "data": x.flatten().tolist()}]}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
    try:
        connection.request("POST", f"/v2/models/{DEMO}/infer", body=body)
        response = connection.getresponse()
        assert response.status == 200
        answer = json.loads(response.read())
    finally:
        connection.close()
    output = answer["outputs"][0]
    return np.array(output["data"], dtype=np.float32).reshape(output["shape"])


def start_traced(model_repo: Path, trace_file: Path, *settings: str):
    """A server tracing with `settings` (--trace-config values) into `trace_file`."""
    flags = []
    for setting in ("level=TIMESTAMPS", *settings, f"triton,file={trace_file}"):
        flags += ["--trace-config", setting]
    return start_server(model_repo, *flags)


def send_ones(server, pb, count: int, rows: int = 1) -> None:
    """`count` ModelInfer calls of `rows` rows of ones, ids r0, r1, ..."""
    channel = grpc.insecure_channel(server.grpc_address)
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    for i in range(count):
        _, request = infer_request(pb, DEMO, np.ones((rows, DEMO_IN), np.float32))
        request.id = f"r{i}"
        stub.ModelInfer(request, timeout=CALL_TIMEOUT_S)
    channel.close()


@pytest.fixture()
def trace_file():
    with tempfile.TemporaryDirectory(prefix="ltserve-trace-") as directory:
        yield Path(directory) / "trace.json"


def test_every_protocol_traced_in_order(model_repo, pb, trace_file):
    server = start_traced(model_repo, trace_file, "rate=1")
    rng = np.random.default_rng()
    try:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        for i, rows in enumerate([1, 3, 5]):
            x = rng.standard_normal((rows, DEMO_IN)).astype(np.float32)
            _, request = infer_request(pb, DEMO, x)
            request.id = f"unary-{i}"
            response = stub.ModelInfer(request, timeout=CALL_TIMEOUT_S)
            assert rel_err(output_array(response), reference(model_repo, DEMO, x)) < FP32_RTOL
        x = rng.standard_normal((2, DEMO_IN)).astype(np.float32)
        _, request = infer_request(pb, DEMO, x)
        request.id = "stream-0"
        answers = list(stub.ModelStreamInfer(iter([request]), timeout=CALL_TIMEOUT_S))
        assert len(answers) == 1 and not answers[0].error_message
        channel.close()
        x = rng.standard_normal((2, DEMO_IN)).astype(np.float32)
        got = http_infer(server.http_port, x, "http-0")
        assert rel_err(got, reference(model_repo, DEMO, x)) < FP32_RTOL
    finally:
        assert server.terminate() == 0, server.log()
    traces = read_traces(trace_file)
    assert len(traces) == 5, traces
    by_request = {trace["request_id"]: trace for trace in traces.values()}
    assert set(by_request) == {"unary-0", "unary-1", "unary-2", "stream-0", "http-0"}
    for request_id, trace in by_request.items():
        assert trace["model_name"] == DEMO
        assert trace["model_version"] == 1
        expected = (HTTP_ORDER if request_id.startswith("http") else
                    STREAM_ORDER if request_id.startswith("stream") else GRPC_ORDER)
        assert names_in_time_order(trace) == expected, request_id
    assert sorted(traces) == list(range(1, 6)), "ids 1 to 5, one per request"


def test_rate_and_count_bound_what_is_traced(model_repo, pb, trace_file):
    server = start_traced(model_repo, trace_file, "rate=3", "count=2")
    try:
        send_ones(server, pb, 10)
    finally:
        assert server.terminate() == 0, server.log()
    traces = read_traces(trace_file)
    # One in three from the first on (r0, r3, ...), and only two of them.
    assert sorted(t["request_id"] for t in traces.values()) == ["r0", "r3"]


def test_log_frequency_writes_numbered_files_while_serving(model_repo, pb, trace_file):
    server = start_traced(model_repo, trace_file, "rate=1", "triton,log-frequency=2")
    try:
        send_ones(server, pb, 4)
        first = Path(f"{trace_file}.0")
        second = Path(f"{trace_file}.1")
        # Written by the server's own writer thread while it keeps serving.
        deadline = time.monotonic() + WRITE_PATIENCE_S
        while time.monotonic() < deadline and not complete_trace_file(second, 2):
            time.sleep(0.05)
        assert complete_trace_file(second, 2), "the second file was not written while serving"
        assert complete_trace_file(first, 2)
    finally:
        assert server.terminate() == 0, server.log()


@pytest.mark.parametrize("flags, says", [
    (["level=TIMESTAMPS"], "needs a file"),
    (["level=TENSORS", "triton,file=/tmp/x.json"], "TIMESTAMPS only"),
    (["rate=0"], "integer >= 1"),
    (["mode=opentelemetry"], "mode=triton"),
    (["level=TIMESTAMPS", "triton,file=/nonexistent-dir/t.json"], "cannot create the trace file"),
])
def test_bad_trace_config_stops_the_server_saying_why(model_repo, flags, says):
    args = [str(SERVER_BINARY), "--model-repository", str(model_repo), "--grpc-port", "0",
            "--http-port", "-1"]
    for flag in flags:
        args += ["--trace-config", flag]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stdout + result.stderr


def test_trace_summary_reads_the_file(model_repo, pb, trace_file):
    server = start_traced(model_repo, trace_file, "rate=1")
    try:
        send_ones(server, pb, 5, rows=2)
    finally:
        assert server.terminate() == 0, server.log()
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "profile" / "trace_summary.py"),
                             "--skip", "1", str(trace_file)],
                            capture_output=True, text=True, check=True)
    assert f"{DEMO} (1): 4 traces" in result.stdout
    assert "| compute: the forward pass | COMPUTE_INPUT_END | COMPUTE_OUTPUT_START | 4 |" \
        in result.stdout
    assert "| handler entry to call done | first | last | 4 |" in result.stdout
