"""Hugging Face encoders with token ids in, served end to end on ltserve's plan: each request
against the float64 `transformers` model on that request alone, padding at the end and in the
middle, masks of every dtype, mixed lengths batched together, lengths other than the one traced,
and the inputs the server must refuse.

The models (models/hf_models.py) are built from configs with random weights and traced at one
length. On the CPU by default (what CI runs); LTSERVE_TEST_DEVICE=gpu serves them with KIND_GPU
in fp32, where the same bounds apply, or with LTSERVE_TEST_PRECISION=bf16 at the bf16 bound."""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch

from ltserve_testing import ROOT, export_models, start_server
from test_server import assert_code, output_array, rel_err

sys.path.insert(0, str(ROOT / "models"))
import hf_models  # noqa: E402  (the exporter's own model table, found by path)

ON_GPU = os.environ.get("LTSERVE_TEST_DEVICE", "cpu") == "gpu"
PRECISION = os.environ.get("LTSERVE_TEST_PRECISION", "fp32")
PLAN_PATH = "gpu-fused" if ON_GPU else "cpu"
# fp32 against float64 (the bound). bf16 keeps 8 bits of mantissa through every GEMM and
# the attention; errors are relative to the output's largest value, and a classifier's three
# small logits after the tanh pooler showed 2.9e-2 on the H200 (other models 2e-3 to 1e-2).
RTOL = 5e-2 if PRECISION == "bf16" else 1e-4
# Batched against alone: the same math, but GEMM blocking depends on the row count.
BATCHING_RTOL = 1e-5 if PRECISION == "fp32" else 1e-2
QUEUE_DELAY_US = 200_000
NP_TYPES = {torch.int64: np.int64, torch.int32: np.int32, torch.bool: np.bool_}
WIRE_TYPES = {torch.int64: "INT64", torch.int32: "INT32", torch.bool: "BOOL"}


@pytest.fixture(scope="module")
def hf_server():
    repo = Path(tempfile.mkdtemp(prefix="ltserve-hf-repo-"))
    export_models(repo, "hf")
    for name in hf_models.MODEL_NAMES:
        config = repo / name / "config.pbtxt"
        text = config.read_text().replace("KIND_AUTO", "KIND_GPU" if ON_GPU else "KIND_CPU")
        if ON_GPU:
            text += f'parameters {{ key: "precision" value {{ string_value: "{PRECISION}" }} }}\n'
        text += f"dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}\n"
        config.write_text(text)
    server = start_server(repo)
    yield server
    server.terminate()
    shutil.rmtree(repo, ignore_errors=True)


@pytest.fixture()
def stub(hf_server, pb):
    channel = grpc.insecure_channel(hf_server.grpc_address)
    yield pb.service_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


_reference_models: dict[str, torch.nn.Module] = {}


def reference(name, ids, mask, types):
    """The float64 transformers model on this request alone."""
    if name not in _reference_models:
        _reference_models[name] = hf_models.build(name).double().eval()
    model = _reference_models[name]
    _, token_types, _, _ = hf_models.spec(name)
    args = [torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(mask)]
    if token_types:
        args.append(torch.from_numpy(types.astype(np.int64)))
    with torch.no_grad():
        return model(*args).numpy()


def request(pb, name, ids, mask, types=None, mask_type=None):
    mask_dtype, token_types, _, _ = hf_models.spec(name)
    message = pb.service.ModelInferRequest(model_name=name, id="hf")
    tensors = [("input_ids", "INT64", ids.astype(np.int64))]
    if mask is not None:
        tensors.append(("attention_mask", mask_type or WIRE_TYPES[mask_dtype], mask))
    if token_types and types is not None:
        tensors.append(("token_type_ids", "INT64", types.astype(np.int64)))
    for tensor_name, datatype, array in tensors:
        message.inputs.add(name=tensor_name, datatype=datatype, shape=list(array.shape))
        message.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
    return message


def random_request(name, batch, seq, rng, padding="end"):
    """Ids, a mask of the model's dtype (padding at the end, in the middle, or none) and token
    types; padded positions carry the padding id, as a tokenizer writes them."""
    mask_dtype, _, _, _ = hf_models.spec(name)
    ids = rng.integers(3, hf_models.VOCAB, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for row in range(batch):
        pad = int(rng.integers(1, max(2, seq // 2)))
        if padding == "end":
            mask[row, seq - pad:] = 0
        elif padding == "middle":
            start = int(rng.integers(1, max(2, seq - pad)))
            mask[row, start:start + pad] = 0
    ids[mask == 0] = hf_models.padding_id(name)
    types = np.zeros((batch, seq), dtype=np.int64)
    types[:, seq // 3:] = 1
    return ids, mask.astype(NP_TYPES[mask_dtype]), types


def served(stub, pb, name, ids, mask, types=None):
    return output_array(stub.ModelInfer(request(pb, name, ids, mask, types), timeout=60))


def assert_matches(name, got, ids, mask, types):
    want = reference(name, ids, mask, types)
    _, _, kind, _ = hf_models.spec(name)
    if kind == "tokens":
        real = mask.astype(bool)
        assert got.shape == want.shape
        assert np.all(got[~real] == 0), "padded positions must be zeros"
        assert rel_err(got[real], want[real]) < RTOL
    else:
        assert got.shape == want.shape
        assert rel_err(got, want) < RTOL, (name, rel_err(got, want))


def test_every_architecture_lowers(hf_server):
    for name in hf_models.LOWERED:
        hf_server.wait_for_log(rf"model '{name}' version 1 ready: path {PLAN_PATH}", 10)


def test_an_unknown_wrapper_serves_through_torchscript_saying_why(hf_server):
    hf_server.wait_for_log(r"model 'bert_unlowered': not lowered to a plan .*aten::mul", 10)
    hf_server.wait_for_log(r"model 'bert_unlowered' version 1 ready: path torchscript", 10)


@pytest.mark.parametrize("name", hf_models.LOWERED)
@pytest.mark.parametrize("padding", ["end", "middle", "none"])
def test_each_request_matches_float64_transformers(stub, pb, name, padding):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{padding}".encode()))  # the same every run
    # Not the traced length (TRACE_SEQ), and odd.
    for batch, seq in [(3, 17), (1, 5), (2, 33)]:
        ids, mask, types = random_request(name, batch, seq, rng, padding)
        assert_matches(name, served(stub, pb, name, ids, mask, types), ids, mask, types)


@pytest.mark.parametrize("name", ["bert_mean", "roberta_max", "xlmr_tokens"])
def test_mixed_lengths_batch_together_and_each_gets_what_it_gets_alone(stub, pb, name):
    rng = np.random.default_rng(7)
    requests = [random_request(name, 1 + i % 3, 3 + 7 * i, rng, "middle") for i in range(6)]
    alone = [served(stub, pb, name, *r) for r in requests]
    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        together = list(pool.map(lambda r: served(stub, pb, name, *r), requests))
    for (ids, mask, types), got, expected in zip(requests, together, alone):
        assert rel_err(got, expected) < BATCHING_RTOL
        assert_matches(name, got, ids, mask, types)


def test_a_row_of_only_padding_answers_the_models_empty_value(stub, pb):
    rng = np.random.default_rng(3)
    ids, mask, types = random_request("bert_mean", 2, 9, rng, "none")
    mask[1, :] = 0
    got = served(stub, pb, "bert_mean", ids, mask)
    assert np.all(got[1] == 0)  # sentence-transformers' mean over no tokens: 0 / 1e-9
    assert_matches("bert_mean", got[:1], ids[:1], mask[:1], types[:1])


def test_mask_values_other_than_0_and_1_are_invalid_argument(stub, pb):
    ids, mask, _ = random_request("bert_mean", 1, 6, np.random.default_rng(1), "none")
    mask[0, 2] = 2
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_mean", ids, mask)),
                grpc.StatusCode.INVALID_ARGUMENT, "0 or 1")


@pytest.mark.parametrize("bad_id", [hf_models.VOCAB, -1, 2**40])
def test_ids_outside_the_vocabulary_are_invalid_argument(stub, pb, bad_id):
    ids, mask, _ = random_request("bert_mean", 2, 6, np.random.default_rng(2), "none")
    ids[1, 4] = bad_id
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_mean", ids, mask)),
                grpc.StatusCode.INVALID_ARGUMENT, str(bad_id), f"[0, {hf_models.VOCAB})")


def test_token_types_outside_the_table_are_invalid_argument(stub, pb):
    ids, mask, types = random_request("bert_cls_norm", 1, 6, np.random.default_rng(4), "none")
    types[0, 3] = 2
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_cls_norm", ids, mask, types)),
                grpc.StatusCode.INVALID_ARGUMENT, "token type", "[0, 2)")


def test_a_sequence_longer_than_the_position_table_is_invalid_argument(stub, pb):
    for name, limit in [("bert_mean", hf_models.MAX_POSITIONS),
                        ("roberta_max", hf_models.MAX_POSITIONS)]:
        ids, mask, _ = random_request(name, 1, limit + 1, np.random.default_rng(5), "none")
        assert_code(lambda: stub.ModelInfer(request(pb, name, ids, mask)),
                    grpc.StatusCode.INVALID_ARGUMENT, str(limit + 1), str(limit))
        ids, mask, types = random_request(name, 1, limit, np.random.default_rng(5), "none")
        assert_matches(name, served(stub, pb, name, ids, mask), ids, mask, types)


def test_a_missing_or_misshapen_mask_is_invalid_argument(stub, pb):
    ids, mask, _ = random_request("bert_mean", 2, 6, np.random.default_rng(6), "none")
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_mean", ids, None)),
                grpc.StatusCode.INVALID_ARGUMENT, "attention_mask")
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_mean", ids, mask[:, :5])),
                grpc.StatusCode.INVALID_ARGUMENT, "[2, 6]")
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_mean", ids, mask.astype(np.int32),
                                                mask_type="INT32")),
                grpc.StatusCode.INVALID_ARGUMENT, "attention_mask")


def test_first_token_pooling_refuses_a_row_that_starts_with_padding(stub, pb):
    ids, mask, types = random_request("bert_pooler", 2, 6, np.random.default_rng(8), "none")
    mask[1, 0] = False
    assert_code(lambda: stub.ModelInfer(request(pb, "bert_pooler", ids, mask, types)),
                grpc.StatusCode.INVALID_ARGUMENT, "row 1", "first token")


def test_bad_requests_break_nothing_for_good_ones(stub, pb):
    rng = np.random.default_rng(9)
    good = random_request("bert_mean", 2, 11, rng, "middle")
    bad_ids, bad_mask, _ = random_request("bert_mean", 2, 11, rng, "none")
    bad_ids[0, 0] = hf_models.VOCAB + 5

    def good_call():
        return served(stub, pb, "bert_mean", *good)

    def bad_call():
        with pytest.raises(grpc.RpcError) as error:
            stub.ModelInfer(request(pb, "bert_mean", bad_ids, bad_mask), timeout=60)
        return error.value.code()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        goods = [pool.submit(good_call) for _ in range(8)]
        bads = [pool.submit(bad_call) for _ in range(8)]
        for future in bads:
            assert future.result() == grpc.StatusCode.INVALID_ARGUMENT
        for future in goods:
            assert_matches("bert_mean", future.result(), *good)


def test_configs_that_contradict_the_module_fail_the_load_saying_what_is_expected(tmp_path):
    export_models(tmp_path / "exported", "hf")
    repo = tmp_path / "repo"
    broken = {
        "mask_fp32": ('name: "bert_mean"', 'name: "attention_mask" data_type: TYPE_INT64',
                      'name: "attention_mask" data_type: TYPE_FP32'),
        "token_dims": ('name: "bert_mean"', "dims: [ 64 ]", "dims: [ -1, 64 ]"),
        "too_long": ('name: "bert_mean"', "instance_group",
                     'parameters { key: "max_sequence_length" value { string_value: "100" } }\n'
                     "instance_group"),
    }
    for name, (header, old, new) in broken.items():
        shutil.copytree(tmp_path / "exported" / "bert_mean", repo / name)
        config = repo / name / "config.pbtxt"
        text = config.read_text()
        assert old in text
        config.write_text(text.replace(header, f'name: "{name}"').replace(old, new))
    server = start_server(repo)
    try:
        server.wait_for_log(r"model 'mask_fp32' version 1 not loaded: .*'attention_mask'.*"
                            r"TYPE_INT64, TYPE_INT32 or TYPE_BOOL", 10)
        server.wait_for_log(r"model 'token_dims' version 1 not loaded: .*one vector of 64 per "
                            r"sequence", 10)
        server.wait_for_log(r"model 'too_long' version 1 not loaded: .*max_sequence_length 100 "
                            r"exceeds the 64 positions", 10)
    finally:
        server.terminate()
