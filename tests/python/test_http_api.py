"""KServe v2 over HTTP/REST against the real ltserve: NVIDIA's tritonclient.http and
perf_analyzer -i http, unchanged, and raw requests for every error path. HTTP and gRPC go
through one request path, so the answers, the statistics and the metrics they move are the same."""
from __future__ import annotations

import gzip
import http.client
import json
import os
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from ltserve_testing import ROOT
from test_operations import scrape, value
from test_server import infer_request, output_array

httpclient = pytest.importorskip("tritonclient.http", reason="tritonclient[http] is not installed")

MODEL, INPUT, OUTPUT = "demo_mlp", "INPUT__0", "OUTPUT__0"
IN_FEATURES, OUT_FEATURES = 128, 10
ODD_IN = 37  # the test models' input width (models/export_models.py)
# fp32 server output against a float64 torch reference (as test_triton_clients.py).
RTOL, ATOL = 1e-4, 1e-5
CALL_TIMEOUT_S = 30.0
PA_WINDOW_MS = 1000
PA_RUN_TIMEOUT_S = 300


@pytest.fixture()
def client(ltserve_server):
    c = httpclient.InferenceServerClient(f"127.0.0.1:{ltserve_server.http_port}",
                                         network_timeout=CALL_TIMEOUT_S)
    yield c
    c.close()


def reference(repo: Path, model: str, x: np.ndarray) -> np.ndarray:
    module = torch.jit.load(str(repo / model / "1" / "model.pt"), map_location="cpu").double().eval()
    with torch.no_grad():
        return module(torch.from_numpy(x.astype(np.float64))).numpy()


def inputs(batch: int, width: int = IN_FEATURES) -> np.ndarray:
    return np.random.default_rng().standard_normal((batch, width)).astype(np.float32)


def infer_input(x: np.ndarray, datatype="FP32", binary=True, name=INPUT):
    tensor = httpclient.InferInput(name, list(x.shape), datatype)
    tensor.set_data_from_numpy(x, binary_data=binary)
    return tensor


def post(port: int, path: str, body: bytes, headers: dict | None = None):
    """One raw request; returns (status, headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
    try:
        connection.request("POST", path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def error_of(status_and_body) -> tuple[int, str]:
    status, headers, body = status_and_body
    assert headers.get("Content-Type") == "application/json", headers
    return status, json.loads(body)["error"]


def infer_json(model: str, x: np.ndarray, datatype="FP32") -> bytes:
    return json.dumps({"inputs": [{"name": INPUT, "shape": list(x.shape), "datatype": datatype,
                                   "data": x.flatten().tolist()}]}).encode()


# --- health, metadata, configuration, statistics, repository ----------------------------------

def test_health_and_readiness(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready(MODEL)
    assert client.is_model_ready(MODEL, "1")
    assert not client.is_model_ready(MODEL, "2")
    assert not client.is_model_ready("no_such_model")


def test_server_metadata_names_the_binary_tensor_extension(client):
    metadata = client.get_server_metadata()
    assert metadata["name"] == "ltserve"
    assert metadata["version"]
    assert {"binary_tensor_data", "classification", "statistics",
            "model_configuration"} <= set(metadata["extensions"])


def test_model_metadata_and_config(client):
    for version in ("", "1"):
        metadata = client.get_model_metadata(MODEL, version)
        assert metadata["name"] == MODEL and metadata["versions"] == ["1"]
        assert metadata["inputs"] == [{"name": INPUT, "datatype": "FP32", "shape": [-1, IN_FEATURES]}]
        assert metadata["outputs"] == [{"name": OUTPUT, "datatype": "FP32", "shape": [-1, OUT_FEATURES]}]
    config = client.get_model_config(MODEL)
    assert config["name"] == MODEL
    assert config["max_batch_size"] == 64
    assert config["input"][0]["dims"] == [IN_FEATURES]
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 200
    with pytest.raises(httpclient.InferenceServerException) as error:
        client.get_model_config("no_such_model")
    assert error.value.status() == "404" and "no_such_model" in error.value.message()
    with pytest.raises(httpclient.InferenceServerException) as error:
        client.get_model_metadata(MODEL, "7")
    assert error.value.status() == "404"


def test_statistics_count_http_and_grpc_requests_alike(client, grpc_stub, pb):
    def count():
        stats = client.get_inference_statistics(MODEL)["model_stats"]
        assert [s["name"] for s in stats] == [MODEL]
        return stats[0]["inference_count"], stats[0]["inference_stats"]["success"]["count"]

    before = count()
    client.infer(MODEL, [infer_input(inputs(3))])
    _, request = infer_request(pb, MODEL, inputs(2))
    grpc_stub.ModelInfer(request, timeout=CALL_TIMEOUT_S)
    samples, successes = count()
    assert (samples - before[0], successes - before[1]) == (5, 2)
    every = client.get_inference_statistics()["model_stats"]
    assert MODEL in {s["name"] for s in every} and len(every) > 1


def test_repository_index_lists_every_model(client, model_repo):
    index = client.get_model_repository_index()
    names = {entry["name"] for entry in index}
    assert names == {p.name for p in model_repo.iterdir() if (p / "config.pbtxt").exists()}
    assert all(entry["state"] == "READY" and entry["version"] == "1" for entry in index)
    status, _, body = post(client_port(client), "/v2/repository/index", b'{"ready": true}')
    assert status == 200 and {e["name"] for e in json.loads(body)} == names


def client_port(client) -> int:
    return client._parsed_url.port


# --- inference ----------------------------------------------------------------------------------

@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("compression", [None, "gzip", "deflate"])
def test_infer_matches_torch(client, model_repo, binary, compression):
    x = inputs(5)
    result = client.infer(MODEL, [infer_input(x, binary=binary)],
                          outputs=[httpclient.InferRequestedOutput(OUTPUT, binary_data=binary)],
                          request_compression_algorithm=compression,
                          response_compression_algorithm=compression)
    got = result.as_numpy(OUTPUT)
    assert got.shape == (5, OUT_FEATURES) and got.dtype == np.float32
    np.testing.assert_allclose(got, reference(model_repo, MODEL, x), rtol=RTOL, atol=ATOL)
    response = result.get_response()
    assert response["model_name"] == MODEL and response["model_version"] == "1"
    assert ("parameters" in response["outputs"][0]) == binary


def test_a_compressed_response_says_its_encoding_and_the_header_length_is_uncompressed(ltserve_server):
    x = inputs(2)
    header = json.dumps({"inputs": [{"name": INPUT, "shape": [2, IN_FEATURES], "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    status, headers, body = post(ltserve_server.http_port, f"/v2/models/{MODEL}/infer",
                                 gzip.compress(header + x.tobytes()),
                                 {"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Encoding": "gzip", "Accept-Encoding": "deflate;q=0.9, gzip;q=0.5"})
    assert status == 200, body
    assert headers["Content-Encoding"] == "deflate"
    assert headers["Content-Type"] == "application/octet-stream"
    plain = zlib.decompress(body)
    length = int(headers["Inference-Header-Content-Length"])
    response = json.loads(plain[:length])
    assert response["outputs"][0]["parameters"]["binary_data_size"] == 2 * OUT_FEATURES * 4
    assert len(plain) == length + 2 * OUT_FEATURES * 4


def test_a_raw_binary_request_is_the_one_input_of_batch_one(ltserve_server, model_repo):
    x = inputs(1)
    status, headers, body = post(ltserve_server.http_port, f"/v2/models/{MODEL}/infer", x.tobytes(),
                                 {"Inference-Header-Content-Length": "0"})
    assert status == 200, body
    length = int(headers["Inference-Header-Content-Length"])
    response = json.loads(body[:length])
    assert response["outputs"][0]["shape"] == [1, OUT_FEATURES]
    got = np.frombuffer(body[length:], np.float32).reshape(1, OUT_FEATURES)
    np.testing.assert_allclose(got, reference(model_repo, MODEL, x), rtol=RTOL, atol=ATOL)
    status, message = error_of(post(ltserve_server.http_port, "/v2/models/two_inputs/infer",
                                    x.tobytes(), {"Inference-Header-Content-Length": "0"}))
    assert status == 400 and "exactly one input" in message
    status, message = error_of(post(ltserve_server.http_port, f"/v2/models/{MODEL}/infer",
                                    x.tobytes()[:100], {"Inference-Header-Content-Length": "0"}))
    assert status == 400 and "has 100 bytes of raw contents" in message, message


def test_async_infer(client, model_repo):
    batches = [inputs(b) for b in (1, 2, 3, 4, 5, 6)]
    pending = [client.async_infer(MODEL, [infer_input(x)]) for x in batches]
    for x, request in zip(batches, pending):
        np.testing.assert_allclose(request.get_result(timeout=CALL_TIMEOUT_S).as_numpy(OUTPUT),
                                   reference(model_repo, MODEL, x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("model,datatype", [("fp16_io", "FP16"), ("bf16_io", "BF16")])
def test_half_precision_in_binary_answers_what_grpc_answers(client, grpc_stub, pb, model, datatype):
    x32 = inputs(3, ODD_IN)
    if datatype == "FP16":
        wire, tensor = x32.astype(np.float16), infer_input(x32.astype(np.float16), "FP16")
    else:
        # tritonclient takes BF16 from float32 and keeps the upper half of each value.
        wire = (x32.view(np.uint32) >> 16).astype(np.uint16)
        tensor = infer_input(x32, "BF16")
    got = client.infer(model, [tensor])
    _, request = infer_request(pb, model, wire, datatype=datatype)
    expected = output_array(grpc_stub.ModelInfer(request, timeout=CALL_TIMEOUT_S), dtype=np.uint16)
    if datatype == "FP16":
        np.testing.assert_array_equal(got.as_numpy(OUTPUT).view(np.uint16), expected)
    else:
        as_float = got.as_numpy(OUTPUT)  # tritonclient widens BF16 to float32
        np.testing.assert_array_equal((as_float.view(np.uint32) >> 16).astype(np.uint16), expected)


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_as_json_is_refused_as_triton_does(client, ltserve_server, datatype):
    model = datatype.lower().replace("fp16", "fp16_io").replace("bf16", "bf16_io")
    status, message = error_of(post(ltserve_server.http_port, f"/v2/models/{model}/infer",
                                    infer_json(model, inputs(1, ODD_IN), datatype)))
    assert status == 400
    assert message == (f"receiving {datatype} data via JSON is not supported. Please use the "
                       f"binary data format for input {INPUT}")
    x = inputs(1, ODD_IN).astype(np.float16 if datatype == "FP16" else np.float32)
    with pytest.raises(httpclient.InferenceServerException) as error:
        client.infer(model, [infer_input(x, datatype)],
                     outputs=[httpclient.InferRequestedOutput(OUTPUT, binary_data=False)])
    assert error.value.status() == "400"
    assert f"sending {datatype} data via JSON is not supported" in error.value.message()


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_classification_answers_the_top_classes_as_bytes(client, model_repo, binary):
    x = inputs(4)
    result = client.infer(MODEL, [infer_input(x)], outputs=[
        httpclient.InferRequestedOutput(OUTPUT, binary_data=binary, class_count=3)])
    classes = result.as_numpy(OUTPUT)
    assert classes.shape == (4, 3)
    assert result.get_response()["outputs"][0]["datatype"] == "BYTES"
    ref = reference(model_repo, MODEL, x)
    for row, expected in zip(classes, ref):
        indexes = [int((c.decode() if isinstance(c, bytes) else c).split(":")[1]) for c in row]
        assert indexes == list(np.argsort(-expected)[:3])


def test_two_outputs_each_as_asked(client):
    x = inputs(2, ODD_IN)
    result = client.infer("two_outputs", [infer_input(x)], outputs=[
        httpclient.InferRequestedOutput("OUTPUT__1", binary_data=False),
        httpclient.InferRequestedOutput("OUTPUT__0", binary_data=True)])
    outputs = result.get_response()["outputs"]
    assert [o["name"] for o in outputs] == ["OUTPUT__1", "OUTPUT__0"]
    assert "data" in outputs[0] and "parameters" in outputs[1]
    assert result.as_numpy("OUTPUT__0").shape == (2, 7)
    assert result.as_numpy("OUTPUT__1").shape == (2, 3)


def test_two_inputs_in_any_order_with_priority_and_timeout(client):
    a, b = inputs(2, ODD_IN), inputs(2, 5)
    result = client.infer("two_inputs", [infer_input(b, name="INPUT__1", binary=False),
                                         infer_input(a, name="INPUT__0")],
                          request_id="r-9", priority=1, timeout=10_000_000)
    assert result.get_response()["id"] == "r-9"
    assert result.as_numpy("OUTPUT__0").shape == (2, 6)


def test_log_settings(client):
    before = client.get_log_settings()
    assert before["log_info"] is True and before["log_format"] == "ISO8601"
    try:
        assert client.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
    finally:
        client.update_log_settings({"log_verbose_level": before["log_verbose_level"]})
    with pytest.raises(httpclient.InferenceServerException) as error:
        client.update_log_settings({"log_file": "/tmp/x"})
    assert error.value.status() == "400"


# --- error paths --------------------------------------------------------------------------------

def test_malformed_json_is_400_with_the_parsers_reason(ltserve_server):
    status, message = error_of(post(ltserve_server.http_port, f"/v2/models/{MODEL}/infer",
                                    b'{"inputs": [{"name": "INPUT__0",'))
    assert status == 400 and "failed to parse the request JSON" in message


@pytest.mark.parametrize("header_length,fragment", [
    ("abc", "Unable to parse Inference-Header-Content-Length"),
    ("-5", "Unable to parse Inference-Header-Content-Length"),
    ("100000", "more than the"),
    ("10", "failed to parse the request JSON"),
])
def test_a_bad_binary_header_length_is_400(ltserve_server, header_length, fragment):
    x = inputs(1)
    header = json.dumps({"inputs": [{"name": INPUT, "shape": [1, IN_FEATURES], "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    status, message = error_of(post(ltserve_server.http_port, f"/v2/models/{MODEL}/infer",
                                    header + x.tobytes(),
                                    {"Inference-Header-Content-Length": header_length}))
    assert status == 400 and fragment in message, message


def test_binary_data_shorter_than_declared_is_400(ltserve_server):
    header = json.dumps({"inputs": [{"name": INPUT, "shape": [1, IN_FEATURES], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 512}}]}).encode()
    status, message = error_of(post(ltserve_server.http_port, f"/v2/models/{MODEL}/infer",
                                    header + bytes(100),
                                    {"Inference-Header-Content-Length": str(len(header))}))
    assert status == 400 and "binary_data_size 512, but only 100 bytes" in message


def test_wrong_datatype_and_shape_are_400_and_counted_as_invalid_input(ltserve_server):
    port = ltserve_server.http_port
    before = value(scrape(port), "ltserve_request_failure_total", model=MODEL, reason="invalid_input")
    status, message = error_of(post(port, f"/v2/models/{MODEL}/infer",
                                    infer_json(MODEL, np.ones((1, IN_FEATURES), np.int32), "INT32")))
    assert status == 400 and "has datatype 'INT32', model expects FP32" in message
    status, message = error_of(post(port, f"/v2/models/{MODEL}/infer", infer_json(MODEL, inputs(1, 7))))
    assert status == 400 and "model expects [-1, 128]" in message
    after = value(scrape(port), "ltserve_request_failure_total", model=MODEL, reason="invalid_input")
    assert after - before == 2


def test_unknown_model_or_version_is_404(ltserve_server):
    status, message = error_of(post(ltserve_server.http_port, "/v2/models/no_such_model/infer", b"{"))
    assert status == 404 and "no_such_model" in message
    status, _ = error_of(post(ltserve_server.http_port, f"/v2/models/{MODEL}/versions/9/infer",
                              infer_json(MODEL, inputs(1))))
    assert status == 404


def test_wrong_method_unknown_path_and_bad_compression(ltserve_server):
    port = ltserve_server.http_port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
    connection.request("GET", f"/v2/models/{MODEL}/infer")
    response = connection.getresponse()
    assert response.status == 405 and json.loads(response.read())["error"] == "Method Not Allowed"
    connection.close()
    assert error_of(post(port, "/v2/no/such/thing", b""))[0] == 404
    status, message = error_of(post(port, f"/v2/models/{MODEL}/infer", b"not gzip",
                                    {"Content-Encoding": "gzip"}))
    assert status == 400 and "Content-Encoding" in message
    status, message = error_of(post(port, f"/v2/models/{MODEL}/infer", b"x",
                                    {"Content-Encoding": "lz4"}))
    assert status == 415 and "lz4" in message
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
    connection.request("GET", "/v2/repository/models/demo_mlp/load")
    assert connection.getresponse().status == 405
    connection.close()


def test_load_and_unload_are_refused_outside_explicit_mode_as_over_grpc(ltserve_server):
    for action in ("load", "unload"):
        status, message = error_of(post(ltserve_server.http_port,
                                        f"/v2/repository/models/demo_mlp/{action}", b""))
        assert status == 503
        assert "explicit model load / unload is not allowed if polling is enabled" in message


def test_the_server_lives_on_after_every_error(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.infer(MODEL, [infer_input(inputs(1))]).as_numpy(OUTPUT).shape == (1, OUT_FEATURES)


# --- perf_analyzer ------------------------------------------------------------------------------

def test_perf_analyzer_over_http(ltserve_server, tmp_path):
    if not (ROOT / ".venv" / "bin" / "perf_analyzer").exists():
        pytest.skip("perf_analyzer is not installed (it ships in the tritonclient wheel)")
    csv = tmp_path / "pa.csv"
    run = subprocess.run(
        [str(ROOT / "scripts" / "perf_analyzer"), "-m", MODEL, "-i", "http",
         "-u", f"127.0.0.1:{ltserve_server.http_port}", "-b", "2", "--concurrency-range", "1:2",
         "--measurement-interval", str(PA_WINDOW_MS), "--stability-percentage", "999",
         "--max-trials", "10", "-f", str(csv)],
        capture_output=True, text=True, timeout=PA_RUN_TIMEOUT_S, env=dict(os.environ))
    assert run.returncode == 0, run.stdout + run.stderr
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("Concurrency,Inferences/Second") and len(rows) == 3, rows
    assert all(float(row.split(",")[1]) > 0 for row in rows[1:]), rows
