"""Limits at the edges: message sizes, duplicated outputs, HTTP connections that send nothing,
and a gRPC port that is already taken, all against the real server binary."""
from __future__ import annotations

import shutil
import socket
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

from ltserve_testing import SERVER_BINARY, copy_model, start_server
from test_server import DEMO, DEMO_IN, assert_code, infer_request, output_array

TINY = "tiny_mlp"
TINY_IN, TINY_OUT = 16, 4
DEFAULT_MAX_RECEIVE_BYTES = 64 << 20


@pytest.fixture()
def tiny_repo(model_repo):
    repo = Path(tempfile.mkdtemp(prefix="ltserve-limits-"))
    copy_model(model_repo, TINY, repo)
    yield repo
    shutil.rmtree(repo, ignore_errors=True)


# --- message sizes ----------------------------------------------------------------------------

def test_a_request_over_the_default_receive_limit_is_resource_exhausted(ltserve_server, pb):
    rows = DEFAULT_MAX_RECEIVE_BYTES // (DEMO_IN * 4) + 1
    _, request = infer_request(pb, DEMO, np.zeros((rows, DEMO_IN), np.float32))
    channel = grpc.insecure_channel(ltserve_server.grpc_address,
                                    options=[("grpc.max_send_message_length", -1)])
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.RESOURCE_EXHAUSTED,
                str(DEFAULT_MAX_RECEIVE_BYTES))
    # The connection and the server are fine afterwards.
    _, request = infer_request(pb, DEMO, np.zeros((2, DEMO_IN), np.float32))
    assert output_array(stub.ModelInfer(request, timeout=30)).shape == (2, 10)
    channel.close()


def test_receive_and_send_limits_follow_their_flags(tiny_repo, pb):
    server = start_server(tiny_repo, "--grpc-max-receive-bytes", "4096",
                          "--grpc-max-send-bytes", "1000")
    try:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        # 100 rows: 6400 bytes in, over the receive limit.
        _, request = infer_request(pb, TINY, np.zeros((100, TINY_IN), np.float32))
        assert_code(lambda: stub.ModelInfer(request, timeout=30),
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "4096")
        # 60 rows: 3840 bytes in (under 4096), 960 bytes of outputs (under 1000): served.
        _, request = infer_request(pb, TINY, np.zeros((60, TINY_IN), np.float32))
        assert output_array(stub.ModelInfer(request, timeout=30)).shape == (60, TINY_OUT)
        # 63 rows: 1008 bytes of outputs, over the send limit; refused with a reason.
        _, request = infer_request(pb, TINY, np.zeros((63, TINY_IN), np.float32))
        assert_code(lambda: stub.ModelInfer(request, timeout=30),
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "1008 bytes", "--grpc-max-send-bytes")
        channel.close()
    finally:
        assert server.terminate() == 0, server.log()


def test_an_output_requested_many_times_is_refused(grpc_stub, pb):
    _, request = infer_request(pb, DEMO, np.zeros((2, DEMO_IN), np.float32))
    for _ in range(1000):
        request.outputs.add(name="OUTPUT__0")
    assert_code(lambda: grpc_stub.ModelInfer(request, timeout=30),
                grpc.StatusCode.INVALID_ARGUMENT, "'OUTPUT__0' is requested twice")


# --- HTTP: connections that send nothing do not starve probes ----------------------------------

IDLE_CONNECTIONS = 200
PROBES = 22
PROBE_TIMEOUT_S = 3.0
PROBE_PATHS = ("/v2/health/live", "/v2/health/ready", "/metrics")


def test_idle_http_connections_do_not_starve_probes(ltserve_server):
    port = ltserve_server.http_port
    stop = threading.Event()
    idle: list[socket.socket] = []

    def connect() -> socket.socket:
        return socket.create_connection(("127.0.0.1", port), timeout=5)

    def hold_connections():
        # Keep IDLE_CONNECTIONS open, reopening those the server closes, as a client that
        # opens connections and sends nothing would.
        while not stop.is_set():
            for i, sock in enumerate(idle):
                sock.setblocking(False)
                try:
                    closed = sock.recv(1) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed and not stop.is_set():
                    sock.close()
                    try:
                        idle[i] = connect()
                    except OSError:
                        pass
            stop.wait(0.1)

    for _ in range(IDLE_CONNECTIONS):
        idle.append(connect())
    holder = threading.Thread(target=hold_connections, daemon=True)
    holder.start()
    answered, failures = 0, []
    try:
        for i in range(PROBES):
            path = PROBE_PATHS[i % len(PROBE_PATHS)]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                            timeout=PROBE_TIMEOUT_S) as response:
                    answered += response.status == 200
            except (urllib.error.URLError, OSError) as error:
                failures.append(f"{path}: {error}")
            time.sleep(0.05)
    finally:
        stop.set()
        holder.join(timeout=10)
        for sock in idle:
            sock.close()
    assert answered == PROBES, f"{answered} of {PROBES} probes answered; {failures[:3]}"


# --- ports --------------------------------------------------------------------------------------

def test_a_grpc_port_in_use_is_a_startup_error(ltserve_server, small_repo_for_ports):
    port = ltserve_server.grpc_address.rsplit(":", 1)[1]
    result = subprocess.run(
        [str(SERVER_BINARY), "--model-repository", str(small_repo_for_ports), "--host", "127.0.0.1",
         "--grpc-port", port, "--http-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert result.returncode == 2, result.stdout
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in result.stdout, result.stdout
    assert "already in use" in result.stdout, result.stdout
    assert "listening" not in result.stdout, result.stdout


@pytest.fixture()
def small_repo_for_ports():
    # The second server never gets as far as loading: an empty repository is enough.
    repo = Path(tempfile.mkdtemp(prefix="ltserve-ports-"))
    yield repo
    shutil.rmtree(repo, ignore_errors=True)
