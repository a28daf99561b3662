"""Transformer encoders served end to end on the plan executor: each request against the
module's own forward in float64, sequences of different lengths batched together, key-padding
masks, and the shapes the server must refuse.

On the CPU by default (what CI runs). LTSERVE_TEST_DEVICE=gpu serves the same models with
KIND_GPU in fp32 (precision parameter), so the same float64 bounds apply: scripts/gpu.sh runs
it that way on the GPU machine.

Encoders take [batch, seq, d] over the wire, also when the module was built with
batch_first=False (the reference transposes for those)."""
from __future__ import annotations

import concurrent.futures
import os
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

ON_GPU = os.environ.get("LTSERVE_TEST_DEVICE", "cpu") == "gpu"
# The execution path the scripted models must load on, as the load log names it.
PLAN_PATH = "gpu-fused" if ON_GPU else "cpu"
# fp32 against float64: the bound for encoders (fp32 on the CPU and on the GPU).
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
# Wrappers forward(x, mask) taking a BOOL key-padding mask MASK__1 [batch, seq]:
# name -> (d_in, d_out). These lower, scripted or traced; MASKED_TRACED (a trace around a bare
# TransformerEncoderLayer) serves through TorchScript.
MASKED = {
    "enc_masked": (64, 64),
    "enc_masked_wrapped_script": (37, 5),
    "enc_masked_wrapped_trace": (37, 5),
}
MASKED_TRACED = "enc_masked_layer_trace"
MASKED_DIMS = {**MASKED, MASKED_TRACED: (64, 64)}
MAX_SEQUENCE_LENGTH = 32  # configured for the masked models


@pytest.fixture(scope="module")
def encoder_server():
    exported = Path(tempfile.mkdtemp(prefix="ltserve-encoders-"))
    repo = Path(tempfile.mkdtemp(prefix="ltserve-encoder-repo-"))
    export_models(exported, "encoder")
    for name in [*MODELS, *MASKED, MASKED_TRACED]:
        shutil.copytree(exported / name, repo / name)
        config = repo / name / "config.pbtxt"
        text = config.read_text().replace("KIND_AUTO", "KIND_GPU" if ON_GPU else "KIND_CPU")
        if ON_GPU:
            text += 'parameters { key: "precision" value { string_value: "fp32" } }\n'
        text += (f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}\n"
                 f'parameters {{ key: "max_tokens_per_batch" value {{ string_value: '
                 f'"{MAX_TOKENS}" }} }}\n')
        if name in MASKED or name == MASKED_TRACED:
            text += (f'parameters {{ key: "max_sequence_length" value {{ string_value: '
                     f'"{MAX_SEQUENCE_LENGTH}" }} }}\n')
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


def test_encoders_run_on_the_plan_executor(encoder_server):
    for model in MODELS:
        encoder_server.wait_for_log(rf"model '{model}' version 1 ready: path {PLAN_PATH}", 10)


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


# --- key-padding masks ----------------------------------------------------------------------

def masked_request(pb, model, x: np.ndarray, mask: np.ndarray | None, mask_datatype="BOOL"):
    _, request = infer_request(pb, model, x)
    if mask is not None:
        request.inputs.add(name="MASK__1", datatype=mask_datatype, shape=list(mask.shape))
        request.raw_input_contents.append(np.ascontiguousarray(mask).tobytes())
    return request


def infer_masked(stub, pb, model: str, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return output_array(stub.ModelInfer(masked_request(pb, model, x, mask), timeout=60))


def masked_reference(repo: Path, model: str, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The module's own masked forward in float64 at the real tokens; zeros at the padded ones
    (what PyTorch's nested-tensor fast path gives; the float64 path computes them instead, and
    a row of only padding comes out NaN there)."""
    module = torch.jit.load(str(repo / model / "1" / "model.pt")).double().eval()
    with torch.no_grad():
        out = module(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(mask)).numpy()
    out = out.copy()
    out[mask] = 0.0
    return out


def random_tokens(model: str, batch: int, seq: int) -> np.ndarray:
    d_in = MASKED_DIMS[model][0]
    return np.random.default_rng().standard_normal((batch, seq, d_in), dtype=np.float32)


def assert_masked_matches(server, stub, pb, model, mask):
    x = random_tokens(model, *mask.shape)
    got = infer_masked(stub, pb, model, x, mask)
    assert got.shape == (*mask.shape, MASKED[model][1])
    expected = masked_reference(server.repo, model, x, mask)
    assert rel_err(got, expected) <= ENCODER_RTOL
    assert np.all(got[mask] == 0.0), "padded positions must be exactly zero"


def test_scripted_mask_wrappers_run_on_the_plan_executor(encoder_server):
    for model in MASKED:
        encoder_server.wait_for_log(rf"model '{model}' version 1 ready: path {PLAN_PATH}", 10)


def test_traced_mask_wrapper_serves_through_torchscript_saying_why(encoder_server):
    encoder_server.wait_for_log(rf"model '{MASKED_TRACED}': not lowered.*key-padding mask", 10)
    encoder_server.wait_for_log(rf"model '{MASKED_TRACED}' version 1 ready: path torchscript", 10)


@pytest.mark.parametrize("model", list(MASKED))
def test_trailing_padding_matches_float64_forward(encoder_server, stub, pb, model):
    mask = np.zeros((3, 11), dtype=bool)
    mask[0, 8:] = True
    mask[2, 1:] = True
    assert_masked_matches(encoder_server, stub, pb, model, mask)


@pytest.mark.parametrize("model", list(MASKED))
def test_padding_in_the_middle_matches_float64_forward(encoder_server, stub, pb, model):
    mask = np.zeros((2, 9), dtype=bool)
    mask[0, 2:5] = True
    mask[1, [0, 3, 4, 8]] = True
    assert_masked_matches(encoder_server, stub, pb, model, mask)


@pytest.mark.parametrize("model", list(MASKED))
def test_fully_padded_row_answers_zeros(encoder_server, stub, pb, model):
    mask = np.zeros((3, 6), dtype=bool)
    mask[1, :] = True
    mask[2, 4:] = True
    assert_masked_matches(encoder_server, stub, pb, model, mask)


def test_request_of_only_padding_answers_zeros(stub, pb):
    model = "enc_masked_wrapped_script"
    got = infer_masked(stub, pb, model, random_tokens(model, 2, 5), np.ones((2, 5), dtype=bool))
    assert got.shape == (2, 5, 5)
    assert np.all(got == 0.0)


def test_masked_and_unmasked_requests_batch_together_and_get_what_they_get_alone(stub, pb):
    model = "enc_masked_wrapped_script"
    rng = np.random.default_rng()
    cases = []
    for i, (batch, seq) in enumerate(((1, 5), (2, 13), (1, 1), (3, 8), (2, 20), (1, 9))):
        # Every other request unmasked (all false); the rest padded at random places.
        mask = rng.random((batch, seq)) < 0.4 if i % 2 else np.zeros((batch, seq), dtype=bool)
        cases.append((random_tokens(model, batch, seq), mask))
    alone = [infer_masked(stub, pb, model, x, mask) for x, mask in cases]
    before = stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=model)).model_stats[0]

    start = threading.Barrier(len(cases))

    def client(i):
        start.wait(timeout=30)
        return infer_masked(stub, pb, model, *cases[i])

    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        together = list(pool.map(client, range(len(cases))))
    for i, (got, expected) in enumerate(zip(together, alone)):
        assert got.shape == expected.shape
        assert rel_err(got, expected) <= BATCHING_RTOL, i
        assert np.all(got[cases[i][1]] == 0.0), i
    stats = stub.ModelStatistics(pb.service.ModelStatisticsRequest(name=model)).model_stats[0]
    assert stats.execution_count - before.execution_count < len(cases), "nothing was batched"


def test_traced_mask_wrapper_answers_correctly_through_torchscript(encoder_server, stub, pb):
    # Served by libtorch in fp32 against the same module's forward in float64, at the real tokens
    # (TorchScript computes the padded positions rather than zeroing them).
    mask = np.zeros((2, 10), dtype=bool)
    mask[0, 7:] = True
    mask[1, [1, 2, 6]] = True
    x = random_tokens(MASKED_TRACED, *mask.shape)
    got = infer_masked(stub, pb, MASKED_TRACED, x, mask)
    assert got.shape == (2, 10, 64)
    expected = masked_reference(encoder_server.repo, MASKED_TRACED, x, mask)
    assert rel_err(got[~mask], expected[~mask]) <= ENCODER_RTOL


def test_traced_and_scripted_wrappers_of_the_same_weights_agree(stub, pb):
    # Both exports share one seed, hence one set of weights: the traced lowering must compute
    # what the scripted one does, zeros at padded positions included.
    mask = np.zeros((3, 12), dtype=bool)
    mask[0, 9:] = True
    mask[1, [0, 5, 6]] = True
    mask[2, :] = True
    x = random_tokens("enc_masked_wrapped_trace", *mask.shape)
    traced = infer_masked(stub, pb, "enc_masked_wrapped_trace", x, mask)
    scripted = infer_masked(stub, pb, "enc_masked_wrapped_script", x, mask)
    assert rel_err(traced, scripted) <= BATCHING_RTOL


def test_mask_of_another_type_is_invalid_argument(stub, pb):
    model = "enc_masked"
    request = masked_request(pb, model, random_tokens(model, 1, 4), np.zeros((1, 4), np.int32),
                             mask_datatype="INT32")
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
                "MASK__1", "BOOL")


def test_mask_not_batch_by_seq_is_invalid_argument(stub, pb):
    model = "enc_masked"
    request = masked_request(pb, model, random_tokens(model, 2, 4), np.zeros((2, 5), bool))
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
                "must be [2, 4], [batch, seq] of input 0; got [2, 5]")


def test_missing_mask_is_invalid_argument(stub, pb):
    model = "enc_masked"
    request = masked_request(pb, model, random_tokens(model, 1, 4), None)
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
                "MASK__1")


def test_sequence_over_max_sequence_length_is_invalid_argument(stub, pb):
    model = "enc_masked"
    seq = MAX_SEQUENCE_LENGTH + 1
    request = masked_request(pb, model, random_tokens(model, 1, seq), np.zeros((1, seq), bool))
    assert_code(lambda: stub.ModelInfer(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
                f"sequence length {seq} exceeds the model's max_sequence_length "
                f"{MAX_SEQUENCE_LENGTH}")

