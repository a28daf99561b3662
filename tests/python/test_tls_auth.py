"""TLS, mutual TLS and bearer tokens on the gRPC port and on the HTTP port, with certificates made
by the openssl CLI for each test run, against the real server binary."""
from __future__ import annotations

import gzip
import http.client
import json
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from ltserve_testing import SERVER_BINARY, copy_model, start_server
from test_operations import http_get, scrape, value
from test_server import infer_request, output_array

TINY, TINY_IN, TINY_OUT = "tiny_mlp", 16, 4
CALL_TIMEOUT_S = 10.0
# --grpc-credentials-refresh-interval in the reload tests, and how long they wait for a change
# to be seen: a few intervals on a loaded machine.
REFRESH_S = 1
RELOAD_WAIT_S = 15.0
# A refused handshake fails the call at once; the bound is for a machine under load.
REFUSED_TIMEOUT_S = 10.0

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(folder: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
            cwd=folder)


def make_leaf(folder: Path, ca: str, name: str) -> None:
    """A certificate for 127.0.0.1 and localhost, good for a server and for a client."""
    (folder / f"{name}.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=folder)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=folder)


@pytest.fixture(scope="module")
def certs():
    folder = Path(tempfile.mkdtemp(prefix="ltserve-certs-"))
    make_ca(folder, "ca")
    make_ca(folder, "other_ca")
    make_leaf(folder, "ca", "server")
    make_leaf(folder, "ca", "client")
    make_leaf(folder, "other_ca", "stranger")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def tiny_repo(model_repo):
    repo = Path(tempfile.mkdtemp(prefix="ltserve-tls-"))
    copy_model(model_repo, TINY, repo)
    yield repo
    shutil.rmtree(repo, ignore_errors=True)


def read(path: Path) -> bytes:
    return path.read_bytes()


def tls_channel(address: str, certs: Path, client: str | None = None, ca: str = "ca"):
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read(certs / f"{ca}.pem"),
        private_key=read(certs / f"{client}.key") if client else None,
        certificate_chain=read(certs / f"{client}.pem") if client else None)
    return grpc.secure_channel(address, credentials)


def assert_refused(channel, pb):
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    with pytest.raises(grpc.RpcError) as error:
        stub.ServerLive(pb.service.ServerLiveRequest(), timeout=REFUSED_TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE, error.value.details()
    channel.close()


def assert_serves(channel, pb):
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    assert stub.ServerLive(pb.service.ServerLiveRequest(), timeout=CALL_TIMEOUT_S).live
    _, request = infer_request(pb, TINY, np.zeros((2, TINY_IN), np.float32))
    assert output_array(stub.ModelInfer(request, timeout=CALL_TIMEOUT_S)).shape == (2, TINY_OUT)
    channel.close()


def test_tls_serves_clients_that_trust_its_ca_and_not_plaintext(tiny_repo, certs, pb):
    server = start_server(tiny_repo, "--grpc-use-ssl", "true",
                          "--grpc-server-cert", str(certs / "server.pem"),
                          "--grpc-server-key", str(certs / "server.key"))
    try:
        assert "tls=on" in server.log()
        assert_serves(tls_channel(server.grpc_address, certs), pb)
        assert_refused(grpc.insecure_channel(server.grpc_address), pb)
    finally:
        assert server.terminate() == 0, server.log()


def test_mutual_tls_refuses_a_client_without_a_valid_certificate(tiny_repo, certs, pb):
    server = start_server(tiny_repo, "--grpc-use-ssl", "true", "--grpc-use-ssl-mutual", "true",
                          "--grpc-server-cert", str(certs / "server.pem"),
                          "--grpc-server-key", str(certs / "server.key"),
                          "--grpc-root-cert", str(certs / "ca.pem"))
    try:
        assert "tls=mutual" in server.log()
        assert_serves(tls_channel(server.grpc_address, certs, "client"), pb)
        assert_refused(tls_channel(server.grpc_address, certs), pb)              # no certificate
        assert_refused(tls_channel(server.grpc_address, certs, "stranger"), pb)  # another CA's
        assert_refused(grpc.insecure_channel(server.grpc_address), pb)
    finally:
        assert server.terminate() == 0, server.log()


TOKEN = "s3cret-token-for-this-test"


def test_a_bearer_token_is_required_on_the_inference_service_only(tiny_repo, pb, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = start_server(tiny_repo, "--grpc-bearer-token-file", str(token_file))
    try:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        _, request = infer_request(pb, TINY, np.zeros((2, TINY_IN), np.float32))
        for metadata in (None, [("authorization", "Bearer wrong")],
                         [("authorization", TOKEN)], [("authorization", f"Bearer {TOKEN}x")]):
            for call, message in ((stub.ServerLive, pb.service.ServerLiveRequest()),
                                  (stub.ModelInfer, request)):
                with pytest.raises(grpc.RpcError) as error:
                    call(message, metadata=metadata, timeout=CALL_TIMEOUT_S)
                assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED, metadata
                assert "Bearer" in error.value.details()
        good = [("authorization", f"Bearer {TOKEN}")]
        assert stub.ServerLive(pb.service.ServerLiveRequest(), metadata=good,
                               timeout=CALL_TIMEOUT_S).live
        got = stub.ModelInfer(request, metadata=good, timeout=CALL_TIMEOUT_S)
        assert output_array(got).shape == (2, TINY_OUT)
        assert value(scrape(server.http_port), "ltserve_unauthenticated_requests_total",
                     protocol="grpc") == 8
        # Probes carry no token: the health service answers them.
        health = pb.health_grpc.HealthStub(channel)
        status = health.Check(pb.health.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert status.status == pb.health.HealthCheckResponse.SERVING
        channel.close()
    finally:
        assert server.terminate() == 0, server.log()


@pytest.mark.parametrize("args, message", [
    (["--grpc-use-ssl", "true"], "--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key"),
    (["--grpc-use-ssl-mutual", "true", "--grpc-server-cert", "{certs}/server.pem",
      "--grpc-server-key", "{certs}/server.key"], "--grpc-use-ssl-mutual needs --grpc-root-cert"),
    (["--grpc-use-ssl", "true", "--grpc-server-cert", "{certs}/missing.pem",
      "--grpc-server-key", "{certs}/server.key"], "--grpc-server-cert '"),
    (["--grpc-bearer-token-file", "{certs}/missing-token"], "--grpc-bearer-token-file: '"),
    (["--grpc-restricted-protocol", "inference:authorization"], "--grpc-restricted-protocol '"),
    (["--grpc-restricted-protocol", "admin:x-key=1"], "unknown protocol 'admin'"),
    (["--http-use-ssl", "true"], "--http-use-ssl needs --http-server-cert and --http-server-key"),
    (["--http-use-ssl-mutual", "true", "--http-server-cert", "{certs}/server.pem",
      "--http-server-key", "{certs}/server.key"], "--http-use-ssl-mutual needs --http-root-cert"),
    (["--http-use-ssl", "true", "--http-server-cert", "{certs}/server.pem",
      "--http-server-key", "{certs}/missing.key"], "--http-server-key '"),
    (["--http-use-ssl", "true", "--http-server-cert", "{certs}/server.pem",
      "--http-server-key", "{certs}/client.key"], "is not the key of the certificate"),
    (["--http-bearer-token-file", "{certs}/missing-token"], "--http-bearer-token-file: '"),
])
def test_security_flags_that_cannot_work_stop_the_start(tiny_repo, certs, args, message):
    args = [a.format(certs=certs) for a in args]
    result = subprocess.run(
        [str(SERVER_BINARY), "--model-repository", str(tiny_repo), "--host", "127.0.0.1",
         "--grpc-port", "0", "--http-port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert result.returncode == 2, result.stdout
    assert message in result.stdout, result.stdout
    assert "listening" not in result.stdout, result.stdout


# --- the HTTP port --------------------------------------------------------------------------------

TINY_INFER = json.dumps({"inputs": [{"name": "INPUT__0", "shape": [1, TINY_IN], "datatype": "FP32",
                                     "data": [0.5] * TINY_IN}]}).encode()


def https_request(port: int, context: ssl.SSLContext | None, method: str, path: str,
                  body: bytes | None = None, headers: dict | None = None):
    """(status, body) of one request, over TLS when `context` is given."""
    if context is None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
    else:
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S,
                                                 context=context)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def tls_context(certs: Path, client: str | None = None, trust: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs / "ca.pem") if trust else None)
    if client:
        context.load_cert_chain(str(certs / f"{client}.pem"), str(certs / f"{client}.key"))
    return context


def assert_http_serves(port: int, context: ssl.SSLContext | None):
    assert https_request(port, context, "GET", "/v2/health/ready")[0] == 200
    status, body = https_request(port, context, "POST", f"/v2/models/{TINY}/infer", TINY_INFER)
    assert status == 200, body
    assert json.loads(body)["outputs"][0]["shape"] == [1, TINY_OUT]


def assert_http_refused(port: int, context: ssl.SSLContext | None):
    # A failed handshake, or (TLS 1.3) a connection the server drops once it has seen no
    # acceptable client certificate; a plaintext request to a TLS port gets no HTTP answer.
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        https_request(port, context, "GET", "/v2/health/live")


def test_http_tls_serves_clients_that_trust_its_ca_and_not_plaintext(tiny_repo, certs):
    server = start_server(tiny_repo, "--http-use-ssl", "true",
                          "--http-server-cert", str(certs / "server.pem"),
                          "--http-server-key", str(certs / "server.key"))
    try:
        assert "tls=off auth=off http_tls=on" in server.log()
        assert_http_serves(server.http_port, tls_context(certs))
        assert_http_refused(server.http_port, tls_context(certs, trust=False))  # unknown CA
        assert_http_refused(server.http_port, None)
        httpclient = pytest.importorskip("tritonclient.http")
        client = httpclient.InferenceServerClient(
            f"127.0.0.1:{server.http_port}", ssl=True,
            ssl_options={"ca_certs": str(certs / "ca.pem")})
        x = np.zeros((2, TINY_IN), np.float32)
        tensor = httpclient.InferInput("INPUT__0", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        assert client.infer(TINY, [tensor]).as_numpy("OUTPUT__0").shape == (2, TINY_OUT)
        client.close()
    finally:
        assert server.terminate() == 0, server.log()


def unauthenticated_count(server, protocol: str) -> float:
    _, text = http_get(server.http_port, "/metrics")
    match = re.search(r'^ltserve_grpc_unauthenticated_total\{protocol="%s"\} (\S+)$' % protocol,
                      text, re.M)
    return float(match.group(1)) if match else 0.0


def call_code(call, message, metadata) -> grpc.StatusCode:
    try:
        call(message, metadata=metadata, timeout=CALL_TIMEOUT_S)
        return grpc.StatusCode.OK
    except grpc.RpcError as error:
        return error.code()


def wait_for_code(call, message, metadata, code) -> None:
    deadline = time.monotonic() + RELOAD_WAIT_S
    while call_code(call, message, metadata) != code:
        assert time.monotonic() < deadline, f"still not {code} after {RELOAD_WAIT_S} s"
        time.sleep(0.1)


def bearer(token: str):
    return [("authorization", f"Bearer {token}")]


def test_model_control_takes_its_own_tokens_and_refusals_are_counted(tiny_repo, pb, tmp_path):
    users, admins = tmp_path / "users", tmp_path / "admins"
    users.write_text("user-1\nuser-2\n")
    admins.write_text("admin-1\n")
    server = start_server(tiny_repo, "--grpc-bearer-token-file", str(users),
                          "--grpc-restricted-protocol",
                          f"model-repository,model-config:authorization=@{admins}")
    try:
        assert "auth=bearer+restricted" in server.log()
        stub = pb.service_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_address))
        _, infer = infer_request(pb, TINY, np.zeros((1, TINY_IN), np.float32))
        config = pb.service.ModelConfigRequest(name=TINY)
        index = pb.service.RepositoryIndexRequest()
        for token in ("user-1", "user-2"):
            assert call_code(stub.ModelInfer, infer, bearer(token)) == grpc.StatusCode.OK
            assert call_code(stub.ModelConfig, config, bearer(token)) == \
                grpc.StatusCode.UNAUTHENTICATED
        assert call_code(stub.ModelInfer, infer, bearer("admin-1")) == \
            grpc.StatusCode.UNAUTHENTICATED
        assert call_code(stub.ModelInfer, infer, None) == grpc.StatusCode.UNAUTHENTICATED
        assert call_code(stub.ModelConfig, config, bearer("admin-1")) == grpc.StatusCode.OK
        assert call_code(stub.RepositoryIndex, index, bearer("admin-1")) == grpc.StatusCode.OK
        assert unauthenticated_count(server, "inference") == 2
        assert unauthenticated_count(server, "model-config") == 2
        assert unauthenticated_count(server, "model-repository") == 0
    finally:
        assert server.terminate() == 0, server.log()


def stream_code(stub, request, metadata) -> grpc.StatusCode:
    """The status of a ModelStreamInfer carrying one request: OK when its one response came."""
    try:
        responses = stub.ModelStreamInfer(iter([request]), metadata=metadata, timeout=CALL_TIMEOUT_S)
        answer = next(responses)
        return grpc.StatusCode.OK if not answer.error_message else grpc.StatusCode.UNKNOWN
    except grpc.RpcError as error:
        return error.code()


def test_load_unload_streaming_and_shared_memory_fall_in_their_protocol_groups(tiny_repo, pb,
                                                                               tmp_path):
    users, admins = tmp_path / "users", tmp_path / "admins"
    users.write_text("user-1\n")
    admins.write_text("admin-1\n")
    server = start_server(tiny_repo, "--model-control-mode", "explicit", "--load-model", TINY,
                          "--grpc-bearer-token-file", str(users),
                          "--grpc-restricted-protocol", f"model-repository:authorization=@{admins}",
                          "--grpc-restricted-protocol", "shared-memory:x-shm-key=k1")
    try:
        stub = pb.service_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_address))
        load = pb.service.RepositoryModelLoadRequest(model_name=TINY)
        unload = pb.service.RepositoryModelUnloadRequest(model_name=TINY)
        shm_status = pb.service.SystemSharedMemoryStatusRequest()
        _, infer = infer_request(pb, TINY, np.zeros((1, TINY_IN), np.float32))
        # Load and unload are model-repository calls: the admin tokens, not the users'.
        for call, message in ((stub.RepositoryModelLoad, load), (stub.RepositoryModelUnload, unload)):
            assert call_code(call, message, bearer("user-1")) == grpc.StatusCode.UNAUTHENTICATED
            assert call_code(call, message, None) == grpc.StatusCode.UNAUTHENTICATED
        assert call_code(stub.RepositoryModelLoad, load, bearer("admin-1")) == grpc.StatusCode.OK
        # The shared-memory calls take their own header.
        assert call_code(stub.SystemSharedMemoryStatus, shm_status, bearer("user-1")) == \
            grpc.StatusCode.UNAUTHENTICATED
        assert call_code(stub.SystemSharedMemoryStatus, shm_status, [("x-shm-key", "k1")]) == \
            grpc.StatusCode.OK
        # A stream is inference: the users' tokens.
        assert stream_code(stub, infer, bearer("user-1")) == grpc.StatusCode.OK
        assert stream_code(stub, infer, bearer("admin-1")) == grpc.StatusCode.UNAUTHENTICATED
        assert stream_code(stub, infer, None) == grpc.StatusCode.UNAUTHENTICATED
        assert unauthenticated_count(server, "model-repository") == 4
        assert unauthenticated_count(server, "shared-memory") == 1
        assert unauthenticated_count(server, "inference") == 2
        assert call_code(stub.RepositoryModelUnload, unload, bearer("admin-1")) == grpc.StatusCode.OK
    finally:
        assert server.terminate() == 0, server.log()


def test_http_mutual_tls_refuses_a_client_without_a_valid_certificate(tiny_repo, certs):
    server = start_server(tiny_repo, "--http-use-ssl-mutual", "true",
                          "--http-server-cert", str(certs / "server.pem"),
                          "--http-server-key", str(certs / "server.key"),
                          "--http-root-cert", str(certs / "ca.pem"))
    try:
        assert "http_tls=mutual" in server.log()
        assert_http_serves(server.http_port, tls_context(certs, "client"))
        assert_http_refused(server.http_port, tls_context(certs))              # no certificate
        assert_http_refused(server.http_port, tls_context(certs, "stranger"))  # another CA's
        assert_http_refused(server.http_port, None)
    finally:
        assert server.terminate() == 0, server.log()


def test_tokens_reload_on_sighup_and_on_a_file_change(tiny_repo, pb, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("first\n")
    server = start_server(tiny_repo, "--grpc-bearer-token-file", str(tokens),
                          "--grpc-credentials-refresh-interval", "3600")
    try:
        stub = pb.service_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_address))
        live = pb.service.ServerLiveRequest()
        assert call_code(stub.ServerLive, live, bearer("first")) == grpc.StatusCode.OK
        tokens.write_text("second\n")
        # The interval is an hour: only the signal can have reloaded it.
        server.process.send_signal(signal.SIGHUP)
        wait_for_code(stub.ServerLive, live, bearer("second"), grpc.StatusCode.OK)
        assert call_code(stub.ServerLive, live, bearer("first")) == grpc.StatusCode.UNAUTHENTICATED
        # A reload that fails keeps the tokens in force and says why.
        tokens.write_text("")
        server.process.send_signal(signal.SIGHUP)
        server.wait_for_log(r"tokens not reloaded \(SIGHUP\).*holds no token", RELOAD_WAIT_S)
        assert call_code(stub.ServerLive, live, bearer("second")) == grpc.StatusCode.OK
    finally:
        assert server.terminate() == 0, server.log()
    tokens.write_text("first\n")
    server = start_server(tiny_repo, "--grpc-bearer-token-file", str(tokens),
                          "--grpc-credentials-refresh-interval", str(REFRESH_S))
    try:
        stub = pb.service_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_address))
        live = pb.service.ServerLiveRequest()
        tokens.write_text("third\n")
        wait_for_code(stub.ServerLive, live, bearer("third"), grpc.StatusCode.OK)
        assert "tokens reloaded (a token file changed)" in server.log()
    finally:
        assert server.terminate() == 0, server.log()


def test_an_http_bearer_token_guards_the_api_and_leaves_health_and_metrics_open(tiny_repo, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = start_server(tiny_repo, "--http-bearer-token-file", str(token_file))
    port = server.http_port
    try:
        assert "http_auth=bearer" in server.log()
        refused = 0
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}):
            for method, path, body in (("POST", f"/v2/models/{TINY}/infer", TINY_INFER),
                                       ("GET", f"/v2/models/{TINY}", None), ("GET", "/v2", None)):
                status, answer = https_request(port, None, method, path, body, headers)
                assert status == 401, (headers, path, answer)
                assert "Bearer" in json.loads(answer)["error"]
                refused += 1
        good = {"Authorization": f"Bearer {TOKEN}"}
        status, answer = https_request(port, None, "POST", f"/v2/models/{TINY}/infer", TINY_INFER, good)
        assert status == 200, answer
        for path in ("/v2/health/live", "/v2/health/ready", f"/v2/models/{TINY}/ready", "/metrics"):
            assert https_request(port, None, "GET", path)[0] == 200, path
        samples = scrape(port)
        assert value(samples, "ltserve_unauthenticated_requests_total", protocol="http") == refused
        assert value(samples, "ltserve_unauthenticated_requests_total", protocol="grpc") == 0
    finally:
        assert server.terminate() == 0, server.log()


def http_status_with(port: int, token: str) -> int:
    return https_request(port, None, "GET", "/v2", None, {"Authorization": f"Bearer {token}"})[0]


def test_http_tokens_are_a_file_of_several_reloaded_on_sighup(tiny_repo, tmp_path):
    tokens = tmp_path / "http-tokens"
    tokens.write_text("# clients\nalpha\n\nbeta\n")
    server = start_server(tiny_repo, "--http-bearer-token-file", str(tokens),
                          "--grpc-credentials-refresh-interval", "3600")
    port = server.http_port
    try:
        assert http_status_with(port, "alpha") == 200
        assert http_status_with(port, "beta") == 200
        assert http_status_with(port, "# clients") == 401
        tokens.write_text("gamma\n")
        # The interval is an hour: only the signal can have reloaded it.
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + RELOAD_WAIT_S
        while http_status_with(port, "gamma") != 200:
            assert time.monotonic() < deadline, "the new HTTP token is not accepted"
            time.sleep(0.1)
        assert http_status_with(port, "alpha") == 401
        # A failed reload keeps the tokens in force and names the HTTP flag.
        tokens.write_text("")
        server.process.send_signal(signal.SIGHUP)
        server.wait_for_log(r"tokens not reloaded \(SIGHUP\).*--http-bearer-token-file", RELOAD_WAIT_S)
        assert http_status_with(port, "gamma") == 200
    finally:
        assert server.terminate() == 0, server.log()


def test_an_http_body_over_the_limit_is_413_even_when_it_arrives_compressed(tiny_repo):
    server = start_server(tiny_repo, "--http-max-input-size", "4096")
    port = server.http_port
    try:
        assert https_request(port, None, "POST", f"/v2/models/{TINY}/infer", TINY_INFER)[0] == 200
        for body, headers in ((TINY_INFER + b" " * 5000, {}),
                              (gzip.compress(TINY_INFER + b" " * 100_000), {"Content-Encoding": "gzip"})):
            assert len(body) < 6000
            status, answer = https_request(port, None, "POST", f"/v2/models/{TINY}/infer", body, headers)
            assert status == 413, answer
            assert "4096 bytes (--http-max-input-size)" in json.loads(answer)["error"]
        assert https_request(port, None, "GET", "/v2/health/live")[0] == 200
    finally:
        assert server.terminate() == 0, server.log()


def served_certificate(certs: Path, tmp_path: Path) -> Path:
    """A folder holding a copy of the server's certificate and key, for a server to watch."""
    served = tmp_path / "served"
    served.mkdir()
    for suffix in ("pem", "key"):
        shutil.copy(certs / f"server.{suffix}", served / f"server.{suffix}")
    return served


def start_watching(repo: Path, protocol: str, served: Path):
    """A server with TLS on `protocol`'s port from the files in `served`, checked every
    REFRESH_S seconds."""
    return start_server(repo, f"--{protocol}-use-ssl", "true",
                        f"--{protocol}-server-cert", str(served / "server.pem"),
                        f"--{protocol}-server-key", str(served / "server.key"),
                        "--grpc-credentials-refresh-interval", str(REFRESH_S))


def renew(certs: Path, served: Path, name: str) -> None:
    """Replaces the served pair with a new one from another CA, so that only a reloaded server
    passes that CA's check; the key goes first, as a renewal replaces files one at a time."""
    make_leaf(certs, "other_ca", name)
    for suffix in ("key", "pem"):
        shutil.copy(certs / f"{name}.{suffix}", served / f"server.{suffix}.new")
        (served / f"server.{suffix}.new").rename(served / f"server.{suffix}")


def test_a_renewed_certificate_serves_new_connections_without_a_restart(tiny_repo, certs, pb,
                                                                        tmp_path):
    served = served_certificate(certs, tmp_path)
    server = start_watching(tiny_repo, "grpc", served)
    try:
        assert_serves(tls_channel(server.grpc_address, certs), pb)
        renew(certs, served, "renewed")
        deadline = time.monotonic() + RELOAD_WAIT_S
        while True:
            channel = tls_channel(server.grpc_address, certs, ca="other_ca")
            stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
            code = call_code(stub.ServerLive, pb.service.ServerLiveRequest(), None)
            channel.close()
            if code == grpc.StatusCode.OK:
                break
            assert time.monotonic() < deadline, f"the renewed certificate is not served: {code}"
            time.sleep(0.2)
        assert_refused(tls_channel(server.grpc_address, certs), pb)  # the old CA no longer fits
    finally:
        assert server.terminate() == 0, server.log()


def test_a_renewed_http_certificate_serves_new_connections_without_a_restart(tiny_repo, certs,
                                                                             tmp_path):
    served = served_certificate(certs, tmp_path)
    server = start_watching(tiny_repo, "http", served)
    try:
        assert_http_serves(server.http_port, tls_context(certs))
        renew(certs, served, "renewed_http")
        other = ssl.create_default_context(cafile=str(certs / "other_ca.pem"))
        deadline = time.monotonic() + RELOAD_WAIT_S
        while True:
            try:
                assert_http_serves(server.http_port, other)
                break
            except (ssl.SSLError, ConnectionError, http.client.HTTPException) as error:
                assert time.monotonic() < deadline, f"the renewed certificate is not served: {error}"
                time.sleep(0.2)
        assert_http_refused(server.http_port, tls_context(certs))  # the old CA no longer fits
        server.wait_for_log(r"HTTP certificates reloaded \(a certificate file changed\)",
                            RELOAD_WAIT_S)
        # A broken file is not taken: the certificate in force stays, and the log says why.
        (served / "server.pem").write_text("not a certificate\n")
        server.process.send_signal(signal.SIGHUP)
        server.wait_for_log(r"HTTP certificates not reloaded \(SIGHUP\).*server\.pem",
                            RELOAD_WAIT_S)
        assert_http_serves(server.http_port, other)
    finally:
        assert server.terminate() == 0, server.log()
