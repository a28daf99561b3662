"""Transformer encoders served end to end on the CPU plan executor: each request against the
module's own forward in float64, sequences of different lengths batched together, and the
shapes the server must refuse.

Encoders take [batch, seq, d] over the wire, also when the module was built with
batch_first=False (the reference transposes for those)."""
from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch

from ltserve_testing import export_models, start_server
from test_server import assert_code, infer_request, output_array, rel_err

# fp32 against float64: the bound for encoders on the CPU.
ENCODER_RTOL = 1e-4
# Batched against alone: the same math, but GEMM blocking depends on the row count, so sums
# may round differently (about 1e-6 seen).
BATCHING_RTOL = 1e-5
# Long enough that requests sent together from threads meet in the queue on a loaded machine.
QUEUE_DELAY_US = 200_000
MAX_TOKENS = 256

# name -> (d_in, d_out, batch_first), as models/encoder_models.py builds them.
MODELS = {
    "enc_post_relu_script": (64, 64, True),
    "enc_pre_gelu_trace": (64, 64, False),
    "seq_wrapped_script": (37, 5, True),
}


@pytest.fixture(scope="module")
def encoder_server():
    exported = Path(tempfile.mkdtemp(prefix="ltserve-encoders-"))
    repo = Path(tempfile.mkdtemp(prefix="ltserve-encoder-repo-"))
    export_models(exported, "encoder")
    for name in MODELS:
        shutil.copytree(exported / name, repo / name)
        config = repo / name / "config.pbtxt"
        text = config.read_text().replace("KIND_AUTO", "KIND_CPU")
        text += (f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}\n"
                 f'parameters {{ key: "max_tokens_per_batch" value {{ string_value: '
                 f'"{MAX_TOKENS}" }} }}\n')
        config.write_text(text)
    server = start_server(repo)
    yield server
    server.terminate()
    shutil.rmtree(exported, ignore_errors=True)
    shutil.rmtree(repo, ignore_errors=True)


@pytest.fixture()
def stub(encoder_server, pb):
    channel = grpc.insecure_channel(encoder_server.grpc_address)
    yield pb.service_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def reference(repo: Path, model: str, x: np.ndarray) -> np.ndarray:
    batch_first = MODELS[model][2]
    module = torch.jit.load(str(repo / model / "1" / "model.pt")).double().eval()
    tokens = torch.from_numpy(x.astype(np.float64))
    with torch.no_grad():
        if batch_first:
            return module(tokens).numpy()
        return module(tokens.transpose(0, 1)).transpose(0, 1).numpy()


def infer(stub, pb, model: str, x: np.ndarray) -> np.ndarray:
    _, request = infer_request(pb, model, x)
    return output_array(stub.ModelInfer(request, timeout=60))


def test_encoders_run_on_the_cpu_plan(encoder_server):
    for model in MODELS:
        encoder_server.wait_for_log(rf"model '{model}' version 1 ready: path cpu", 10)


@pytest.mark.parametrize("model", list(MODELS))
def test_each_request_matches_float64_forward(encoder_server, stub, pb, model):
    d_in, d_out, _ = MODELS[model]
    rng = np.random.default_rng()
    for batch, seq in ((1, 1), (3, 7), (1, 128)):
        x = rng.standard_normal((batch, seq, d_in), dtype=np.float32)
        got = infer(stub, pb, model, x)
        assert got.shape == (batch, seq, d_out)
        assert rel_err(got, reference(encoder_server.repo, model, x)) <= ENCODER_RTOL, (batch, seq)


def test_mixed_lengths_batch_together_and_each_gets_what_it_gets_alone(stub, pb):
    model = "enc_post_relu_script"
    d_in = MODELS[model][0]
    rng = np.random.default_rng()
    inputs = [rng.standard_normal((1 + i % 2, seq, d_in), dtype=np.float32)
              for i, seq in enumerate((5, 1, 13, 2, 40, 9))]
    alone = [infer(stub, pb, model, x) for x in inputs]
    before = stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=model)).model_stats[0]

    start = threading.Barrier(len(inputs))

    def client(i):
        start.wait(timeout=30)
        return infer(stub, pb, model, inputs[i])

    with concurrent.futures.ThreadPoolExecutor(len(inputs)) as pool:
        together = list(pool.map(client, range(len(inputs))))
    for i, (got, expected) in enumerate(zip(together, alone)):
        assert got.shape == expected.shape
        assert rel_err(got, expected) <= BATCHING_RTOL, i
    stats = stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=model)).model_stats[0]
    executions = stats.execution_count - before.execution_count
    assert executions < len(inputs), "no request was batched with another"


def test_wrong_width_is_invalid_argument(stub, pb):
    x = np.zeros((1, 7, 63), dtype=np.float32)
    _, request = infer_request(pb, "enc_post_relu_script", x)
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT)


def test_more_tokens_than_a_batch_holds_is_invalid_argument(stub, pb):
    x = np.zeros((2, MAX_TOKENS // 2 + 1, 64), dtype=np.float32)
    _, request = infer_request(pb, "enc_post_relu_script", x)
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
                "tokens exceed")
