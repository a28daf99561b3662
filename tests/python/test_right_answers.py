"""The right status for what goes wrong: requests that do not parse, models that raise, and
models that answer shapes their config does not declare, all against the real server binary."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch
from torch import nn

from ltserve_testing import start_server
from test_operations import http_get, scrape, value
from test_server import assert_code, infer_request, output_array

MODEL_NAME_PLACEHOLDER = "ABCDEFGH"
INVALID_UTF8 = b"\xff\xfe\xfd\xfc\xff\xfe\xfd\xfc"
INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"


def raw_infer(channel):
    """ModelInfer taking and returning bytes, to send messages the stubs would not build."""
    return channel.unary_unary(INFER_METHOD)


def invalid_utf8_request(pb) -> bytes:
    request = pb.service.ModelInferRequest(model_name=MODEL_NAME_PLACEHOLDER)
    data = request.SerializeToString()
    assert MODEL_NAME_PLACEHOLDER.encode() in data
    return data.replace(MODEL_NAME_PLACEHOLDER.encode(), INVALID_UTF8)


def test_an_unparseable_request_is_invalid_argument_with_a_reason(ltserve_server, pb):
    channel = grpc.insecure_channel(ltserve_server.grpc_address)
    call = raw_infer(channel)
    details = assert_code(lambda: call(invalid_utf8_request(pb), timeout=30),
                          grpc.StatusCode.INVALID_ARGUMENT, "inference.ModelInferRequest")
    assert "UTF-8" in details, details
    # A field whose length runs past the end of the message.
    assert_code(lambda: call(b"\x0a\xff\xff\xff\x0f", timeout=30),
                grpc.StatusCode.INVALID_ARGUMENT, "inference.ModelInferRequest")
    channel.close()


@pytest.mark.parametrize("method", ["ModelReady", "ModelMetadata", "ModelConfig",
                                    "ModelStatistics"])
def test_every_method_answers_an_unparseable_request_with_invalid_argument(ltserve_server, pb,
                                                                           method):
    request = getattr(pb.service, f"{method}Request")(name=MODEL_NAME_PLACEHOLDER)
    data = request.SerializeToString().replace(MODEL_NAME_PLACEHOLDER.encode(), INVALID_UTF8)
    channel = grpc.insecure_channel(ltserve_server.grpc_address)
    call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}")
    details = assert_code(lambda: call(data, timeout=30), grpc.StatusCode.INVALID_ARGUMENT,
                          f"inference.{method}Request")
    assert "UTF-8" in details, details
    for empty in ("ServerLive", "ServerReady", "ServerMetadata"):
        garbage = channel.unary_unary(f"/inference.GRPCInferenceService/{empty}")
        assert_code(lambda: garbage(b"\x0a\xff\xff\xff\x0f", timeout=30),
                    grpc.StatusCode.INVALID_ARGUMENT, f"inference.{empty}Request")
    channel.close()


FLOOD = 200
# The server logs at most 5 libprotobuf lines per 10 s, plus one line counting those it
# dropped; the bound leaves room for an interval boundary inside the flood.
MAX_LOGGED = 12


def test_a_flood_of_unparseable_requests_writes_few_log_lines(ltserve_server, pb):
    def utf8_lines():
        return sum("UTF-8" in line or "libprotobuf" in line
                   for line in ltserve_server.log().splitlines())

    before = utf8_lines()
    channel = grpc.insecure_channel(ltserve_server.grpc_address)
    call = raw_infer(channel)
    data = invalid_utf8_request(pb)
    for _ in range(FLOOD):
        with pytest.raises(grpc.RpcError):
            call(data, timeout=30)
    channel.close()
    assert utf8_lines() - before <= MAX_LOGGED


# --- models that fail -----------------------------------------------------------------------

WIDTH, OUT = 8, 4
RAISE_BELOW = -1000.0
WRONG_ABOVE = 1000.0


class Moody(nn.Module):
    """Raises on very negative inputs and answers a narrower output on very large ones; zeros
    (the load-time warm-up) get the declared shape."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, OUT)

    def forward(self, x):
        if bool((x < -1000.0).any()):  # RAISE_BELOW: TorchScript takes no globals
            raise RuntimeError("values below -1000 are not served")
        y = self.fc(x)
        if bool((x > 1000.0).any()):  # WRONG_ABOVE
            return y[:, :3]
        return y


class AlwaysNarrow(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, OUT)

    def forward(self, x):
        return self.fc(x)[:, :3]


def write_model(repo: Path, name: str, module: nn.Module) -> None:
    (repo / name / "1").mkdir(parents=True)
    torch.jit.script(module.eval()).save(str(repo / name / "1" / "model.pt"))
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nplatform: "pytorch_libtorch"\nmax_batch_size: 8\n'
        f'input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
        f'output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ {OUT} ] }} ]\n')


@pytest.fixture(scope="module")
def failing_server():
    repo = Path(tempfile.mkdtemp(prefix="ltserve-failing-"))
    torch.manual_seed(0)
    write_model(repo, "moody", Moody())
    write_model(repo, "always_narrow", AlwaysNarrow())
    server = start_server(repo, "--strict-readiness", "false")
    yield server
    server.terminate()
    shutil.rmtree(repo, ignore_errors=True)


def test_a_model_whose_forward_raises_answers_internal_and_stays_ready(failing_server, pb):
    channel = grpc.insecure_channel(failing_server.grpc_address)
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    labels = dict(model="moody", version="1")
    before = scrape(failing_server.http_port)
    x = np.full((2, WIDTH), RAISE_BELOW * 2, np.float32)
    for _ in range(3):
        _, request = infer_request(pb, "moody", x)
        assert_code(lambda: stub.ModelInfer(request, timeout=30), grpc.StatusCode.INTERNAL,
                    "values below -1000 are not served")
    after = scrape(failing_server.http_port)

    def delta(reason):
        return value(after, "ltserve_request_failure_total", reason=reason, **labels) - \
            value(before, "ltserve_request_failure_total", reason=reason, **labels)

    assert (delta("internal"), delta("invalid_input")) == (3, 0)
    # Failing every request is the model's problem, visible in the metrics; it is still loaded
    # and still answers the inputs it can.
    assert stub.ModelReady(pb.service.ModelReadyRequest(name="moody")).ready
    assert http_get(failing_server.http_port, "/v2/models/moody/ready")[0] == 200
    _, request = infer_request(pb, "moody", np.zeros((2, WIDTH), np.float32))
    assert output_array(stub.ModelInfer(request, timeout=30)).shape == (2, OUT)
    channel.close()


def test_an_answer_of_the_wrong_shape_is_internal(failing_server, pb):
    channel = grpc.insecure_channel(failing_server.grpc_address)
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    _, request = infer_request(pb, "moody", np.full((2, WIDTH), WRONG_ABOVE * 2, np.float32))
    assert_code(lambda: stub.ModelInfer(request, timeout=30), grpc.StatusCode.INTERNAL,
                "[2, 3]", "[-1, 4]")
    channel.close()


def test_a_model_whose_warm_up_answers_the_wrong_shape_is_not_loaded(failing_server, pb):
    channel = grpc.insecure_channel(failing_server.grpc_address)
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    assert not stub.ModelReady(pb.service.ModelReadyRequest(name="always_narrow")).ready
    log = failing_server.log()
    assert "model 'always_narrow' version 1 not loaded" in log, log
    assert "output 'OUTPUT__0'" in log and "[1, 3]" in log, log
    channel.close()
