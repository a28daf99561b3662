"""SIGTERM under load from many clients: every call is answered (OK or UNAVAILABLE), none is
cancelled by the server closing connections under it. Against the real server binary."""
from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from ltserve_testing import copy_model, start_server
from test_server import infer_request

TINY, TINY_IN = "tiny_mlp", 16
CLIENTS = 64
TRIALS = 5
# Each client stops at its first UNAVAILABLE, as a client that goes to another replica would;
# these bound a trial that goes wrong.
CLIENT_TIME_LIMIT_S = 60.0
CALL_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def tiny_repo(model_repo):
    repo = Path(tempfile.mkdtemp(prefix="ltserve-shutdown-many-"))
    copy_model(model_repo, TINY, repo)
    yield repo
    shutil.rmtree(repo, ignore_errors=True)


def one_trial(repo: Path, pb) -> tuple[dict, int, str]:
    server = start_server(repo, "--exit-timeout", "20")
    codes: dict = {}
    lock = threading.Lock()
    ok_total = [0]
    x = np.zeros((1, TINY_IN), np.float32)

    def client():
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        _, request = infer_request(pb, TINY, x)
        stop_at = time.monotonic() + CLIENT_TIME_LIMIT_S
        while time.monotonic() < stop_at:
            try:
                stub.ModelInfer(request, timeout=CALL_TIMEOUT_S)
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            with lock:
                codes[code] = codes.get(code, 0) + 1
                ok_total[0] += code == grpc.StatusCode.OK
            if code != grpc.StatusCode.OK:
                break
        channel.close()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            if ok_total[0] >= 4 * CLIENTS:
                break
        time.sleep(0.02)
    server.process.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(timeout=CLIENT_TIME_LIMIT_S + CALL_TIMEOUT_S)
    exit_code = server.terminate(timeout_s=60)
    return codes, exit_code, server.log()


def test_sigterm_under_many_clients_cancels_no_call(tiny_repo, pb):
    seen = []
    for _ in range(TRIALS):
        codes, exit_code, log = one_trial(tiny_repo, pb)
        seen.append(codes)
        assert exit_code == 0, log
        assert "all accepted requests finished" in log, log
    cancelled = sum(c.get(grpc.StatusCode.CANCELLED, 0) for c in seen)
    assert cancelled == 0, seen
    for codes in seen:
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, seen
        # Every client ended on UNAVAILABLE: none was left hanging or cut off.
        assert codes.get(grpc.StatusCode.UNAVAILABLE, 0) == CLIENTS, seen
