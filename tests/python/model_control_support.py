"""Repositories for the model control and streaming tests: the demo models copied into a fresh
directory, with extra versions and config changes, and NVIDIA's client pointed at a server."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ltserve_testing import export_models

TINY_INPUT_WIDTH = 16

# How long a state change (a poll, an unload's release) may take on a loaded 2-core machine.
STATE_CHANGE_TIMEOUT_S = 30.0
STATE_POLL_INTERVAL_S = 0.05


def export_demo_models() -> Path:
    repo = Path(tempfile.mkdtemp(prefix="ltserve-control-src-"))
    export_models(repo, "demo")
    return repo


def make_repo(source: Path, tmp_path: Path, models=("tiny_mlp",)) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in models:
        shutil.copytree(source / name, repo / name)
    return repo


def add_version(repo: Path, model: str, version: int) -> None:
    target = repo / model / str(version)
    target.mkdir()
    shutil.copy(repo / model / "1" / "model.pt", target / "model.pt")


def append_config(repo: Path, model: str, text: str) -> None:
    with open(repo / model / "config.pbtxt", "a") as config:
        config.write("\n" + text + "\n")


def copy_as(repo: Path, source_model: str, new_name: str, extra_config: str = "") -> None:
    """`source_model` under another name (its config's name changed), with config text added."""
    shutil.copytree(repo / source_model, repo / new_name)
    config = (repo / new_name / "config.pbtxt").read_text()
    config = config.replace(f'name: "{source_model}"', f'name: "{new_name}"')
    (repo / new_name / "config.pbtxt").write_text(config + "\n" + extra_config + "\n")


def tiny_config_json(**fields) -> str:
    """tiny_mlp's configuration as the JSON a load request's 'config' parameter carries."""
    config = {
        "name": "tiny_mlp",
        "platform": "pytorch_libtorch",
        "max_batch_size": 256,
        "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [TINY_INPUT_WIDTH]}],
        "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [4]}],
    }
    config.update(fields)
    return json.dumps(config)


def tiny_inputs(grpcclient, batch: int = 1, width: int = TINY_INPUT_WIDTH):
    x = np.random.rand(batch, width).astype(np.float32)
    tensor = grpcclient.InferInput("INPUT__0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return [tensor]


def index_rows(client) -> dict[tuple[str, str], tuple[str, str]]:
    """(name, version) -> (state, reason) from RepositoryIndex."""
    return {(m.name, m.version): (m.state, m.reason)
            for m in client.get_model_repository_index().models}


def wait_until(predicate, what: str, timeout_s: float = STATE_CHANGE_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(STATE_POLL_INTERVAL_S)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def server_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")
