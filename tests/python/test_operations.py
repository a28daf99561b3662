"""Operations: metrics that move with traffic, health over gRPC and HTTP, readiness rules, and
graceful shutdown under load, all against the real server binary."""
from __future__ import annotations

import concurrent.futures
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch

from ltserve_testing import copy_model, start_server
from test_server import DEMO, DEMO_IN, FP32_RTOL, infer_request, output_array, reference, rel_err

# Generous bound for a scrape or a health answer on a loaded 2-core CI machine.
HTTP_TIMEOUT_S = 10.0


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=HTTP_TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    status, text = http_get(port, "/metrics")
    assert status == 200
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"unparseable exposition line: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def value(samples, name, **labels) -> float:
    want = set(labels.items())
    return sum(v for (n, l), v in samples.items() if n == name and want <= set(l))


# --- metrics ----------------------------------------------------------------------------------

def test_metrics_move_by_the_expected_amounts(ltserve_server, grpc_stub, pb):
    port = ltserve_server.http_port
    before = scrape(port)
    batches = [1, 3, 8, 2]
    for b in batches:
        _, request = infer_request(pb, DEMO, np.ones((b, DEMO_IN), np.float32))
        grpc_stub.ModelInfer(request)
    _, bad = infer_request(pb, DEMO, np.ones((1, DEMO_IN + 1), np.float32))
    with pytest.raises(grpc.RpcError):
        grpc_stub.ModelInfer(bad)
    after = scrape(port)
    m = dict(model=DEMO, version="1")

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("ltserve_request_success_total", **m) == len(batches)
    assert delta("ltserve_request_failure_total", reason="invalid_input", **m) == 1
    assert delta("ltserve_inference_count_total", **m) == sum(batches)
    executions = delta("ltserve_execution_count_total", **m)
    assert 1 <= executions <= len(batches)
    # Failed requests are counted by reason only, not in the latency histogram.
    assert delta("ltserve_request_duration_seconds_count", **m) == len(batches)
    assert delta("ltserve_queue_duration_seconds_count", **m) == len(batches)
    assert delta("ltserve_compute_infer_duration_seconds_count", **m) == executions
    assert delta("ltserve_batch_size_count", **m) == executions
    assert delta("ltserve_batch_size_sum", **m) == sum(batches)
    assert value(after, "ltserve_pending_requests", **m) == 0
    assert value(after, "ltserve_model_ready", **m) == 1
    assert value(after, "ltserve_model_load_duration_seconds", **m) > 0
    assert any(n == "ltserve_build_info" for n, _ in after)


def test_exposition_passes_promtool(ltserve_server):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus'); run scripts/setup.sh")
    _, text = http_get(ltserve_server.http_port, "/metrics")
    result = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                            capture_output=True)
    # promtool exits 0 when the exposition parses; lint remarks (e.g. on histogram naming) would
    # show in its output and are treated as failures too.
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


# --- health -----------------------------------------------------------------------------------

def test_http_health_endpoints(ltserve_server):
    port = ltserve_server.http_port
    assert http_get(port, "/v2/health/live")[0] == 200
    assert http_get(port, "/v2/health/ready")[0] == 200
    assert http_get(port, f"/v2/models/{DEMO}/ready")[0] == 200
    assert http_get(port, "/v2/models/no_such_model/ready")[0] == 404


def test_grpc_health_check(ltserve_server, pb):
    channel = grpc.insecure_channel(ltserve_server.grpc_address)
    health = pb.health_grpc.HealthStub(channel)
    for service in ("", "inference.GRPCInferenceService"):
        response = health.Check(pb.health.HealthCheckRequest(service=service), timeout=10)
        assert response.status == pb.health.HealthCheckResponse.SERVING
    channel.close()


@pytest.fixture()
def small_repo(model_repo):
    repo = Path(tempfile.mkdtemp(prefix="ltserve-small-"))
    copy_model(model_repo, DEMO, repo)
    yield repo
    shutil.rmtree(repo, ignore_errors=True)


def test_a_broken_model_does_not_stop_the_others_and_strict_readiness(small_repo, pb):
    broken = small_repo / "broken"
    (broken / "1").mkdir(parents=True)
    (broken / "config.pbtxt").write_text('name: "broken"\nplatform: "pytorch_libtorch"\noptimization { }\n')
    for strict, ready in (("true", False), ("false", True)):
        server = start_server(small_repo, "--strict-readiness", strict)
        try:
            assert "broken" in server.log() and "optimization" in server.log()
            channel = grpc.insecure_channel(server.grpc_address)
            stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
            assert stub.ServerReady(pb.service.ServerReadyRequest()).ready is ready
            assert http_get(server.http_port, "/v2/health/ready")[0] == (200 if ready else 503)
            assert http_get(server.http_port, f"/v2/models/{DEMO}/ready")[0] == 200
            assert http_get(server.http_port, "/v2/models/broken/ready")[0] == 503
            x = np.random.default_rng().standard_normal((2, DEMO_IN), dtype=np.float32)
            _, request = infer_request(pb, DEMO, x)
            got = output_array(stub.ModelInfer(request))
            assert rel_err(got, reference(small_repo, DEMO, x)) <= FP32_RTOL
            channel.close()
        finally:
            assert server.terminate() == 0


# --- graceful shutdown --------------------------------------------------------------------------

# The test model waits this long for a batch to fill, so that at SIGTERM there are requests
# accepted but not yet executed: the drain must run them, not drop them.
SLOW_QUEUE_DELAY_US = 300_000
LOAD_CLIENTS = 12
# After the signal plus this margin (a request sent just before the signal may still be on its
# way), every new request must be refused.
REFUSAL_MARGIN_S = 1.0


def make_slow_batching_model(src_repo: Path, dst_repo: Path) -> None:
    copy_model(src_repo, DEMO, dst_repo)
    (dst_repo / DEMO).rename(dst_repo / "slow_mlp")
    config = (dst_repo / "slow_mlp" / "config.pbtxt").read_text()
    config = config.replace(f'name: "{DEMO}"', 'name: "slow_mlp"')
    config = re.sub(r"max_queue_delay_microseconds:\s*\d+",
                    f"max_queue_delay_microseconds: {SLOW_QUEUE_DELAY_US}", config)
    assert str(SLOW_QUEUE_DELAY_US) in config
    (dst_repo / "slow_mlp" / "config.pbtxt").write_text(config)


def test_sigterm_under_load_finishes_accepted_requests_and_refuses_new_ones(model_repo, pb):
    repo = Path(tempfile.mkdtemp(prefix="ltserve-shutdown-"))
    make_slow_batching_model(model_repo, repo)
    server = start_server(repo, "--exit-timeout", "20")
    module = torch.jit.load(str(repo / "slow_mlp" / "1" / "model.pt")).double().eval()
    results = []  # (sent_at, done_at, status code, correct)
    lock = threading.Lock()
    stop = threading.Event()

    def client(seed):
        rng = np.random.default_rng(seed)
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        while not stop.is_set():
            x = rng.standard_normal((1, DEMO_IN), dtype=np.float32)
            _, request = infer_request(pb, "slow_mlp", x)
            sent = time.monotonic()
            try:
                got = output_array(stub.ModelInfer(request, timeout=30))
                with torch.no_grad():
                    ref = module(torch.from_numpy(x).double()).numpy()
                outcome = (grpc.StatusCode.OK, rel_err(got, ref) <= FP32_RTOL)
            except grpc.RpcError as error:
                outcome = (error.code(), True)
            with lock:
                results.append((sent, time.monotonic(), *outcome))
        channel.close()

    threads = [threading.Thread(target=client, args=(s,)) for s in range(LOAD_CLIENTS)]
    for t in threads:
        t.start()
    # Let a few batches complete, then signal while requests sit in the queue.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            if sum(1 for r in results if r[2] == grpc.StatusCode.OK) >= 2 * LOAD_CLIENTS:
                break
        time.sleep(0.05)
    signalled_at = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    time.sleep(REFUSAL_MARGIN_S + 0.5)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    exit_code = server.process.wait(timeout=60)
    shutil.rmtree(repo, ignore_errors=True)

    # Sent before the signal: answered, or refused if it reached the server after the signal.
    early = {r[2] for r in results if r[0] < signalled_at}
    assert early <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, early
    assert all(r[3] for r in results), "an OK response had wrong numbers"
    drained = [r for r in results if r[0] < signalled_at < r[1] and r[2] == grpc.StatusCode.OK]
    assert drained, "no request in flight at SIGTERM completed: nothing was drained"
    # Sent after it: refused with UNAVAILABLE while the server drains, and for as long as the
    # clients keep sending; the server closes the connections only once they stop, so none is
    # cancelled under them.
    late = [r for r in results if r[0] > signalled_at + REFUSAL_MARGIN_S]
    late_codes = [r[2] for r in late]
    assert late and set(late_codes) == {grpc.StatusCode.UNAVAILABLE}, late_codes
    assert {r[2] for r in results} <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}
    assert exit_code == 0, server.log()
    assert "all accepted requests finished" in server.log()


def test_health_watch_sees_shutdown(small_repo, pb):
    server = start_server(small_repo, "--exit-timeout", "5")
    channel = grpc.insecure_channel(server.grpc_address)
    health = pb.health_grpc.HealthStub(channel)
    statuses = []
    stream = health.Watch(pb.health.HealthCheckRequest(service=""), timeout=60)
    first = next(stream)
    statuses.append(first.status)
    assert first.status == pb.health.HealthCheckResponse.SERVING
    server.process.send_signal(signal.SIGTERM)
    try:
        for message in stream:
            statuses.append(message.status)
            if message.status == pb.health.HealthCheckResponse.NOT_SERVING:
                break
    except grpc.RpcError:
        pass  # the server closed the stream after reporting
    assert pb.health.HealthCheckResponse.NOT_SERVING in statuses, statuses
    assert server.process.wait(timeout=60) == 0
    channel.close()


# --- deadlines and cancellation through gRPC ----------------------------------------------------

# Well inside SLOW_QUEUE_DELAY_US: the request is still queued when its deadline passes or its
# client gives up.
CLIENT_GIVES_UP_S = 0.05


def test_grpc_deadline_and_cancellation_leave_the_queue(model_repo, pb):
    repo = Path(tempfile.mkdtemp(prefix="ltserve-cancel-"))
    make_slow_batching_model(model_repo, repo)
    server = start_server(repo)
    try:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        x = np.ones((1, DEMO_IN), np.float32)
        labels = dict(model="slow_mlp", version="1")
        before = scrape(server.http_port)

        _, request = infer_request(pb, "slow_mlp", x)
        with pytest.raises(grpc.RpcError) as error:
            stub.ModelInfer(request, timeout=CLIENT_GIVES_UP_S)
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

        future = stub.ModelInfer.future(request)
        time.sleep(CLIENT_GIVES_UP_S)
        assert future.cancel()

        # The server answers both well before the batching window would have run them.
        deadline = time.monotonic() + SLOW_QUEUE_DELAY_US / 1e6 * 10
        while time.monotonic() < deadline:
            after = scrape(server.http_port)
            timeouts = value(after, "ltserve_request_failure_total", reason="timeout", **labels) - \
                value(before, "ltserve_request_failure_total", reason="timeout", **labels)
            cancels = value(after, "ltserve_request_failure_total", reason="cancelled", **labels) - \
                value(before, "ltserve_request_failure_total", reason="cancelled", **labels)
            # A failure is counted before its request leaves the pending gauge.
            pending = value(after, "ltserve_pending_requests", **labels)
            if timeouts >= 1 and cancels >= 1 and pending == 0:
                break
            time.sleep(0.02)
        assert (timeouts, cancels, pending) == (1, 1, 0)
        # Neither was executed: no sample was inferred.
        assert value(after, "ltserve_inference_count_total", **labels) == \
            value(before, "ltserve_inference_count_total", **labels)
        channel.close()
    finally:
        assert server.terminate() == 0
        shutil.rmtree(repo, ignore_errors=True)


def test_triton_thread_counts_size_atens_pool_and_the_first_model_decides(model_repo, pb,
                                                                           tmp_path):
    """INTRA_OP_THREAD_COUNT, as Triton's PyTorch backend reads it: the pool is the process's,
    so of two models asking different counts one decides and the other's load line says so."""
    copy_model(model_repo, DEMO, tmp_path)
    shutil.copytree(tmp_path / DEMO, tmp_path / "demo_again")
    for model, threads in ((DEMO, 1), ("demo_again", 3)):
        config = tmp_path / model / "config.pbtxt"
        text = config.read_text().replace(f'name: "{DEMO}"', f'name: "{model}"')
        config.write_text(text + 'parameters: { key: "INTRA_OP_THREAD_COUNT" '
                          f'value: {{ string_value: "{threads}" }} }}\n')
    server = start_server(tmp_path)
    try:
        lines = {model: server.wait_for_log(rf"model '{model}' version 1 ready: path cpu \(CPU "
                                            r"plan \(ATen fp32, (\d+) threads?([^)]*)\)", 10)
                 for model in (DEMO, "demo_again")}
        counts = {int(match.group(1)) for match in lines.values()}
        assert len(counts) == 1 and counts <= {1, 3}, lines
        notes = [match.group(2) for match in lines.values() if match.group(2)]
        assert len(notes) == 1, lines
        assert "not applied: model '" in notes[0] and "first, for the whole process" in notes[0]
        stub = pb.service_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_address))
        for model in (DEMO, "demo_again"):
            x = np.random.default_rng().standard_normal((5, DEMO_IN), dtype=np.float32)
            _, request = infer_request(pb, model, x)
            got = output_array(stub.ModelInfer(request, timeout=10))
            assert rel_err(got, reference(tmp_path, model, x)) <= FP32_RTOL
    finally:
        assert server.terminate() == 0, server.log()


def test_polling_workers_answer_every_request(model_repo, pb, tmp_path):
    """worker_poll_microseconds: idle workers poll before they sleep. Lone requests, requests
    after the poll window, and concurrent ones all get their own right answer, and the server
    stops cleanly (tests/scheduler WorkerPoll times the stop itself)."""
    copy_model(model_repo, DEMO, tmp_path)
    config = tmp_path / DEMO / "config.pbtxt"
    config.write_text(config.read_text() + 'parameters: { key: "worker_poll_microseconds" '
                      'value: { string_value: "500000" } }\n')
    server = start_server(tmp_path)
    try:
        stub = pb.service_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_address))
        rng = np.random.default_rng()

        def check(rows: int) -> None:
            x = rng.standard_normal((rows, DEMO_IN), dtype=np.float32)
            _, request = infer_request(pb, DEMO, x)
            got = output_array(stub.ModelInfer(request, timeout=10))
            assert rel_err(got, reference(tmp_path, DEMO, x)) <= FP32_RTOL

        for rows in (1, 3, 1):  # lone requests, each while the last one's worker polls
            check(rows)
        time.sleep(0.6)  # past the window: the workers sleep, the next request wakes one
        check(2)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(check, [1 + i % 4 for i in range(64)]))
    finally:
        assert server.terminate() == 0, server.log()
