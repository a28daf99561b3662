"""End-to-end tests of the KServe v2 gRPC service against the real ltserve binary.

Outputs are compared with the TorchScript module run by torch in float64; float32 serving is
held to a relative error of 1e-5 (max |a-b| / max |ref|), the bar the CPU executor meets."""
from __future__ import annotations

import concurrent.futures
import threading

import grpc
import numpy as np
import pytest
import torch

FP32_RTOL = 1e-5
DEMO = "demo_mlp"
DEMO_IN, DEMO_OUT = 128, 10
DEMO_MAX_BATCH = 64


def reference(repo, model, x: np.ndarray) -> np.ndarray:
    module = torch.jit.load(str(repo / model / "1" / "model.pt")).double().eval()
    with torch.no_grad():
        return module(torch.from_numpy(x.astype(np.float64))).numpy()


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


def infer_request(pb, model, x: np.ndarray, datatype="FP32", name="INPUT__0", **params):
    request = pb.service.ModelInferRequest(model_name=model, id="req-1")
    tensor = request.inputs.add(name=name, datatype=datatype, shape=list(x.shape))
    request.raw_input_contents.append(np.ascontiguousarray(x).tobytes())
    for key, value in params.items():
        request.parameters[key].int64_param = value
    return tensor, request


def output_array(response, index=0, dtype=np.float32):
    shape = list(response.outputs[index].shape)
    return np.frombuffer(response.raw_output_contents[index], dtype=dtype).reshape(shape)


def assert_code(call, code: grpc.StatusCode, *fragments: str):
    with pytest.raises(grpc.RpcError) as error:
        call()
    assert error.value.code() == code, error.value.details()
    for fragment in fragments:
        assert fragment in error.value.details(), error.value.details()
    return error.value.details()


# --- health and metadata ------------------------------------------------------------------

def test_server_live_and_ready(grpc_stub, pb):
    assert grpc_stub.ServerLive(pb.service.ServerLiveRequest()).live
    assert grpc_stub.ServerReady(pb.service.ServerReadyRequest()).ready


def test_model_ready(grpc_stub, pb):
    assert grpc_stub.ModelReady(pb.service.ModelReadyRequest(name=DEMO)).ready
    assert grpc_stub.ModelReady(pb.service.ModelReadyRequest(name=DEMO, version="1")).ready
    assert_code(lambda: grpc_stub.ModelReady(pb.service.ModelReadyRequest(name="nope")),
                grpc.StatusCode.NOT_FOUND, "nope")


def test_server_metadata(grpc_stub, pb):
    metadata = grpc_stub.ServerMetadata(pb.service.ServerMetadataRequest())
    assert metadata.name == "ltserve"
    assert metadata.version


def test_model_metadata(grpc_stub, pb):
    metadata = grpc_stub.ModelMetadata(pb.service.ModelMetadataRequest(name=DEMO))
    assert metadata.name == DEMO and list(metadata.versions) == ["1"]
    assert metadata.platform == "pytorch_libtorch"
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [("INPUT__0", "FP32", [-1, DEMO_IN])]
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.outputs] == [("OUTPUT__0", "FP32", [-1, DEMO_OUT])]


def test_model_config(grpc_stub, pb):
    config = grpc_stub.ModelConfig(pb.service.ModelConfigRequest(name=DEMO)).config
    assert config.name == DEMO and config.max_batch_size == DEMO_MAX_BATCH
    assert config.platform == "pytorch_libtorch"
    assert list(config.input[0].dims) == [DEMO_IN]


# --- inference ----------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 5, DEMO_MAX_BATCH])
def test_infer_raw_fp32_matches_torch(grpc_stub, pb, ltserve_server, batch):
    x = np.random.default_rng().standard_normal((batch, DEMO_IN), dtype=np.float32)
    _, request = infer_request(pb, DEMO, x)
    response = grpc_stub.ModelInfer(request)
    assert response.model_name == DEMO and response.model_version == "1" and response.id == "req-1"
    assert response.outputs[0].name == "OUTPUT__0" and response.outputs[0].datatype == "FP32"
    got = output_array(response)
    assert got.shape == (batch, DEMO_OUT)
    assert rel_err(got, reference(ltserve_server.repo, DEMO, x)) <= FP32_RTOL


def test_infer_typed_contents(grpc_stub, pb, ltserve_server):
    x = np.random.default_rng().standard_normal((3, DEMO_IN), dtype=np.float32)
    request = pb.service.ModelInferRequest(model_name=DEMO)
    tensor = request.inputs.add(name="INPUT__0", datatype="FP32", shape=[3, DEMO_IN])
    tensor.contents.fp32_contents.extend(x.ravel().tolist())
    got = output_array(grpc_stub.ModelInfer(request))
    assert rel_err(got, reference(ltserve_server.repo, DEMO, x)) <= FP32_RTOL


def test_requested_output_by_name(grpc_stub, pb):
    x = np.zeros((2, DEMO_IN), dtype=np.float32)
    _, request = infer_request(pb, DEMO, x)
    request.outputs.add(name="OUTPUT__0")
    response = grpc_stub.ModelInfer(request)
    assert [o.name for o in response.outputs] == ["OUTPUT__0"]


# --- every bad input gets its status, and the server keeps serving --------------------------

def bad_requests(pb):
    x = np.zeros((2, DEMO_IN), dtype=np.float32)
    cases = {}

    _, r = infer_request(pb, "no_such_model", x)
    cases["unknown model"] = (r, grpc.StatusCode.NOT_FOUND, ["no_such_model"])
    _, r = infer_request(pb, DEMO, x)
    r.model_version = "7"
    cases["unknown version"] = (r, grpc.StatusCode.NOT_FOUND,
                                ["Request for unknown model: 'demo_mlp' version 7 is not found"])
    _, r = infer_request(pb, DEMO, x, name="WRONG")
    cases["wrong input name"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["WRONG", "INPUT__0"])
    _, r = infer_request(pb, DEMO, x)
    r.inputs.add(name="EXTRA", datatype="FP32", shape=[2, DEMO_IN])
    r.raw_input_contents.append(x.tobytes())
    cases["too many inputs"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["expects 1 input"])
    r = pb.service.ModelInferRequest(model_name=DEMO)
    cases["no inputs"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["expects 1 input"])
    _, r = infer_request(pb, DEMO, x.astype(np.float16), datatype="FP16")
    cases["wrong datatype"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["FP16", "FP32"])
    _, r = infer_request(pb, DEMO, np.zeros((2, DEMO_IN + 1), np.float32))
    cases["wrong width"] = (r, grpc.StatusCode.INVALID_ARGUMENT, [f"[2, {DEMO_IN + 1}]", f"[-1, {DEMO_IN}]"])
    _, r = infer_request(pb, DEMO, np.zeros((DEMO_IN,), np.float32))
    cases["missing batch dim"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["shape"])
    _, r = infer_request(pb, DEMO, np.zeros((DEMO_MAX_BATCH + 1, DEMO_IN), np.float32))
    cases["batch too large"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["max_batch_size"])
    _, r = infer_request(pb, DEMO, np.zeros((0, DEMO_IN), np.float32))
    cases["batch zero"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["batch size 0"])
    t, r = infer_request(pb, DEMO, x)
    r.raw_input_contents[0] = r.raw_input_contents[0][:-4]
    cases["short raw bytes"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["bytes"])
    t, r = infer_request(pb, DEMO, x)
    r.raw_input_contents.append(b"\0" * 8)
    cases["extra raw contents"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["raw_input_contents"])
    t, r = infer_request(pb, DEMO, x)
    t.contents.fp32_contents.extend([1.0])
    cases["raw and typed mixed"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["one or the other"])
    r = pb.service.ModelInferRequest(model_name=DEMO)
    t = r.inputs.add(name="INPUT__0", datatype="FP32", shape=[2, DEMO_IN])
    t.contents.fp32_contents.extend([1.0] * 5)
    cases["typed count mismatch"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["5 values"])
    r = pb.service.ModelInferRequest(model_name=DEMO)
    r.inputs.add(name="INPUT__0", datatype="FP32", shape=[2, DEMO_IN])
    cases["no data"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["no data"])
    _, r = infer_request(pb, DEMO, x)
    r.outputs.add(name="NOPE")
    cases["unknown output"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["NOPE", "OUTPUT__0"])
    _, r = infer_request(pb, DEMO, x)
    r.parameters["priority"].string_param = "high"
    cases["bad priority parameter"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["priority"])
    _, r = infer_request(pb, DEMO, x, timeout=-5)
    cases["negative timeout"] = (r, grpc.StatusCode.INVALID_ARGUMENT, ["timeout"])
    return cases


def test_every_bad_input_gets_its_status_and_the_server_keeps_serving(grpc_stub, pb, ltserve_server):
    for name, (request, code, fragments) in bad_requests(pb).items():
        with pytest.raises(grpc.RpcError) as error:
            grpc_stub.ModelInfer(request)
        assert error.value.code() == code, f"{name}: {error.value.code()} {error.value.details()}"
        for fragment in fragments:
            assert fragment in error.value.details(), f"{name}: {error.value.details()!r} lacks {fragment!r}"
    x = np.random.default_rng().standard_normal((4, DEMO_IN), dtype=np.float32)
    _, request = infer_request(pb, DEMO, x)
    got = output_array(grpc_stub.ModelInfer(request))
    assert rel_err(got, reference(ltserve_server.repo, DEMO, x)) <= FP32_RTOL


def test_invalid_requests_are_counted_as_failures(grpc_stub, pb):
    def fail_count():
        stats = grpc_stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=DEMO))
        return stats.model_stats[0].inference_stats.fail.count

    before = fail_count()
    _, request = infer_request(pb, DEMO, np.zeros((2, DEMO_IN + 1), np.float32))
    assert_code(lambda: grpc_stub.ModelInfer(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert fail_count() == before + 1


# --- concurrency: batches form, and nobody gets someone else's answer ----------------------

CONCURRENT_CLIENTS = 32
REQUESTS_PER_CLIENT = 8


def test_concurrent_clients_each_get_their_own_output_and_batches_form(ltserve_server, pb):
    repo = ltserve_server.repo
    rng = np.random.default_rng()
    inputs = [rng.standard_normal((1 + i % 3, DEMO_IN), dtype=np.float32)
              for i in range(CONCURRENT_CLIENTS * REQUESTS_PER_CLIENT)]
    expected = [reference(repo, DEMO, x) for x in inputs]
    channel = grpc.insecure_channel(ltserve_server.grpc_address)
    stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
    stats_before = stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=DEMO)).model_stats[0]

    start = threading.Barrier(CONCURRENT_CLIENTS)

    def client(c):
        start.wait(timeout=30)
        errors = []
        for k in range(REQUESTS_PER_CLIENT):
            i = c * REQUESTS_PER_CLIENT + k
            _, request = infer_request(pb, DEMO, inputs[i])
            got = output_array(stub.ModelInfer(request, timeout=60))
            if rel_err(got, expected[i]) > FP32_RTOL:
                errors.append(i)
        return errors

    with concurrent.futures.ThreadPoolExecutor(CONCURRENT_CLIENTS) as pool:
        mismatched = sum(pool.map(client, range(CONCURRENT_CLIENTS)), [])
    assert mismatched == []

    stats = stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=DEMO)).model_stats[0]
    samples = sum(x.shape[0] for x in inputs)
    assert stats.inference_count - stats_before.inference_count == samples
    executions = stats.execution_count - stats_before.execution_count
    assert executions < len(inputs), "no request was batched with another"
    before = {b.batch_size: b.compute_infer.count for b in stats_before.batch_stats}
    grown = [b.batch_size for b in stats.batch_stats
             if b.compute_infer.count > before.get(b.batch_size, 0)]
    assert max(grown) > 3, f"no batch larger than one request formed: sizes {grown}"
    channel.close()
