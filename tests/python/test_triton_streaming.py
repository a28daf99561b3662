"""ModelStreamInfer through NVIDIA's tritonclient.grpc (start_stream / async_stream_infer):
responses in request order, a failed request answered in its place with error_message while
the stream goes on, and a client that closes its stream with requests still queued."""
from __future__ import annotations

import queue
import shutil
import time

import numpy as np
import pytest

grpcclient = pytest.importorskip("tritonclient.grpc")

from ltserve_testing import start_server  # noqa: E402
from model_control_support import (  # noqa: E402
    copy_as, export_demo_models, make_repo, tiny_inputs, wait_until)

# slow_mlp holds a lone request in its queue this long, waiting for a batch; tiny_mlp answers
# at once. A stream mixing the two gets its fast answers before the slow ones.
SLOW_QUEUE_DELAY_US = 300_000
# Long enough that a stream closed right after sending finds its requests still queued.
STUCK_QUEUE_DELAY_US = 5_000_000
RESPONSE_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def server():
    source = export_demo_models()
    (source / "served").mkdir()
    repo = make_repo(source, source / "served", ("tiny_mlp",))
    copy_as(repo, "tiny_mlp", "slow_mlp")
    (repo / "slow_mlp" / "config.pbtxt").write_text(
        (repo / "slow_mlp" / "config.pbtxt").read_text().replace(
            "max_queue_delay_microseconds: 100", f"max_queue_delay_microseconds: {SLOW_QUEUE_DELAY_US}"))
    copy_as(repo, "tiny_mlp", "stuck_mlp")
    (repo / "stuck_mlp" / "config.pbtxt").write_text(
        (repo / "stuck_mlp" / "config.pbtxt").read_text().replace(
            "max_queue_delay_microseconds: 100", f"max_queue_delay_microseconds: {STUCK_QUEUE_DELAY_US}"))
    started = start_server(repo)
    yield started
    assert started.terminate() == 0, started.log()[-4000:]
    shutil.rmtree(source, ignore_errors=True)


@pytest.fixture()
def stream(server):
    """(client, responses): a started stream whose callback puts (result, error) on the queue."""
    client = grpcclient.InferenceServerClient(server.grpc_address)
    responses: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    yield client, responses
    client.stop_stream()
    client.close()


def take(responses: queue.Queue, count: int):
    return [responses.get(timeout=RESPONSE_TIMEOUT_S) for _ in range(count)]


def test_responses_come_in_request_order_whatever_finishes_first(stream):
    client, responses = stream
    models = ["slow_mlp", "tiny_mlp", "tiny_mlp", "slow_mlp", "tiny_mlp"]
    for i, model in enumerate(models):
        client.async_stream_infer(model, tiny_inputs(grpcclient), request_id=str(i))
    answered = take(responses, len(models))
    assert [error for _, error in answered] == [None] * len(models)
    assert [result.get_response().id for result, _ in answered] == [str(i) for i in range(len(models))]
    assert [result.get_response().model_name for result, _ in answered] == models
    for result, _ in answered:
        assert result.as_numpy("OUTPUT__0").shape == (1, 4)


def test_a_failed_request_is_answered_in_its_place_and_the_stream_goes_on(stream):
    client, responses = stream
    client.async_stream_infer("tiny_mlp", tiny_inputs(grpcclient), request_id="good-1")
    client.async_stream_infer("tiny_mlp", tiny_inputs(grpcclient, width=3), request_id="bad")
    client.async_stream_infer("no_such_model", tiny_inputs(grpcclient), request_id="unknown")
    client.async_stream_infer("tiny_mlp", tiny_inputs(grpcclient), request_id="good-2")
    (first, e1), (bad, e2), (unknown, e3), (last, e4) = take(responses, 4)
    assert e1 is None and first.get_response().id == "good-1"
    assert bad is None and "INPUT__0" in e2.message() and "16" in e2.message()
    assert unknown is None and "unknown model 'no_such_model'" in e3.message()
    assert e4 is None and last.get_response().id == "good-2"


def test_the_stream_answers_the_same_numbers_as_a_plain_infer(server, stream):
    client, responses = stream
    x = np.random.rand(3, 16).astype(np.float32)
    tensor = grpcclient.InferInput("INPUT__0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    client.async_stream_infer("tiny_mlp", [tensor], request_id="same")
    (result, error), = take(responses, 1)
    assert error is None
    plain = grpcclient.InferenceServerClient(server.grpc_address).infer("tiny_mlp", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), plain.as_numpy("OUTPUT__0"))


def failed_count(client, model: str) -> int:
    stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
    return int(stats["inference_stats"].get("fail", {}).get("count", 0))


def test_closing_the_stream_cancels_its_queued_requests(server):
    client = grpcclient.InferenceServerClient(server.grpc_address)
    failed_before = failed_count(client, "stuck_mlp")
    responses: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    queued = 4
    for i in range(queued):
        client.async_stream_infer("stuck_mlp", tiny_inputs(grpcclient), request_id=str(i))
    time.sleep(0.2)  # let the requests reach the queue
    start = time.monotonic()
    client.stop_stream(cancel_requests=True)
    # Cancelled in the queue, well before their batch delay would have run them.
    wait_until(lambda: failed_count(client, "stuck_mlp") == failed_before + queued,
               "the closed stream's requests cancelled")
    assert time.monotonic() - start < STUCK_QUEUE_DELAY_US / 1e6
    assert client.is_server_ready()
    assert client.infer("tiny_mlp", tiny_inputs(grpcclient)) is not None
