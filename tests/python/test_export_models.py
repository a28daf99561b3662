"""models/export_models.py writes repositories the server can read: every config.pbtxt parses
as the project's ModelConfig, and every model's TorchScript forward takes the configured inputs
and returns the configured outputs."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
from google.protobuf import text_format

from ltserve_testing import export_models, stubs

TORCH_DTYPES = {"TYPE_FP32": torch.float32, "TYPE_FP16": torch.float16,
                "TYPE_BF16": torch.bfloat16}
BATCH = 3  # any batch the models accept; odd on purpose


@pytest.fixture(scope="module")
def model_config_pb2():
    stubs()  # generates model_config_pb2 next to the service stubs
    return importlib.import_module("model_config_pb2")


@pytest.fixture(scope="module", params=["demo", "test"])
def exported(request, tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp(f"repo-{request.param}")
    export_models(repo, request.param)
    return repo


def read_config(model_dir: Path, model_config_pb2):
    return text_format.Parse((model_dir / "config.pbtxt").read_text(),
                             model_config_pb2.ModelConfig())


def test_configs_parse_and_match_the_models(exported, model_config_pb2):
    model_dirs = sorted(p for p in exported.iterdir() if p.is_dir())
    assert model_dirs, "the export wrote no models"
    for model_dir in model_dirs:
        config = read_config(model_dir, model_config_pb2)
        assert config.name == model_dir.name
        assert config.platform == "pytorch_libtorch"
        module = torch.jit.load(str(model_dir / "1" / "model.pt"))
        type_name = model_config_pb2.DataType.Name
        inputs = [torch.randn(BATCH, *t.dims).to(TORCH_DTYPES[type_name(t.data_type)])
                  for t in config.input]
        with torch.no_grad():
            result = module(*inputs)
        outputs = result if isinstance(result, tuple) else (result,)
        assert len(outputs) == len(config.output), model_dir.name
        for tensor, spec in zip(outputs, config.output):
            where = (model_dir.name, spec.name)
            assert list(tensor.shape) == [BATCH, *spec.dims], where
            assert tensor.dtype == TORCH_DTYPES[type_name(spec.data_type)], where


def test_demo_models_are_as_documented(model_config_pb2, tmp_path):
    export_models(tmp_path, "demo")
    demo = read_config(tmp_path / "demo_mlp", model_config_pb2)
    assert demo.max_batch_size == 64
    assert demo.dynamic_batching.max_queue_delay_microseconds == 200
    assert [(t.name, list(t.dims)) for t in demo.input] == [("INPUT__0", [128])]
    assert [(t.name, list(t.dims)) for t in demo.output] == [("OUTPUT__0", [10])]
    tiny = read_config(tmp_path / "tiny_mlp", model_config_pb2)
    assert tiny.max_batch_size == 256
    assert tiny.HasField("dynamic_batching")


def test_export_is_deterministic(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    export_models(first, "demo")
    export_models(second, "demo")
    for name in ("demo_mlp", "tiny_mlp"):
        a = torch.jit.load(str(first / name / "1" / "model.pt")).state_dict()
        b = torch.jit.load(str(second / name / "1" / "model.pt")).state_dict()
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a), name
