"""NVIDIA's own clients against the real ltserve: tritonclient[grpc] calls and perf_analyzer
runs, unchanged, as a Triton user would make them. Also ltserve's own ltserve-cli and
ltserve-bench against the same server.

Runs in a pytest process of its own (scripts/test.sh): tritonclient's generated model_config.proto
and the one the other suites generate from proto/ cannot share protobuf's descriptor pool."""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ltserve_testing import ROOT, start_server

grpcclient = pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed")

MODEL = "demo_mlp"
INPUT, OUTPUT = "INPUT__0", "OUTPUT__0"
IN_FEATURES, OUT_FEATURES, MAX_BATCH = 128, 10, 64
# fp32 server output against a float64 torch reference of the same weights: a 128-512-512-10
# MLP accumulates a few hundred fp32 roundings per output, well inside these bounds.
RTOL, ATOL = 1e-4, 1e-5
# Bound on any single call; the server is already up and warm when these tests run.
CALL_TIMEOUT_S = 30.0
# perf_analyzer: measurement window per concurrency level, and the bound on the whole run.
PA_WINDOW_MS = 1000
# The test asks perf_analyzer to finish without errors, not for a quiet machine: CI shares two
# cores with the server, so its stability rule (default 10%) is relaxed to "any 3 windows".
PA_STABILITY_PCT = 999
PA_RUN_TIMEOUT_S = 300


def reference(repo: Path, inputs: np.ndarray) -> np.ndarray:
    module = torch.jit.load(str(repo / MODEL / "1" / "model.pt"), map_location="cpu").double().eval()
    with torch.no_grad():
        return module(torch.from_numpy(inputs.astype(np.float64))).numpy()


def fresh_inputs(batch: int) -> np.ndarray:
    return np.random.default_rng().standard_normal((batch, IN_FEATURES)).astype(np.float32)


@pytest.fixture()
def triton(ltserve_server):
    client = grpcclient.InferenceServerClient(url=ltserve_server.grpc_address)
    yield client
    client.close()


def make_input(data: np.ndarray):
    tensor = grpcclient.InferInput(INPUT, list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return tensor


def test_health_calls(triton):
    assert triton.is_server_live()
    assert triton.is_server_ready()
    assert triton.is_model_ready(MODEL)
    # An unknown model answers ready=false or NOT_FOUND (which tritonclient raises): both say
    # "not ready"; anything else is a protocol mismatch.
    try:
        assert not triton.is_model_ready("no_such_model")
    except grpcclient.InferenceServerException as error:
        assert "NOT_FOUND" in str(error.status()), error


def test_server_metadata(triton):
    metadata = triton.get_server_metadata()
    assert metadata.name
    assert metadata.version


def test_model_metadata(triton):
    metadata = triton.get_model_metadata(MODEL)
    assert metadata.name == MODEL
    assert [i.name for i in metadata.inputs] == [INPUT]
    assert metadata.inputs[0].datatype == "FP32"
    assert list(metadata.inputs[0].shape) == [-1, IN_FEATURES]
    assert [o.name for o in metadata.outputs] == [OUTPUT]
    assert list(metadata.outputs[0].shape) == [-1, OUT_FEATURES]


def test_model_metadata_unknown_model(triton):
    with pytest.raises(grpcclient.InferenceServerException) as error:
        triton.get_model_metadata("no_such_model")
    assert "NOT_FOUND" in str(error.value.status())


@pytest.mark.parametrize("batch", [1, 3, MAX_BATCH])
def test_infer_matches_torch(triton, ltserve_server, batch):
    data = fresh_inputs(batch)
    output = np.full((batch, OUT_FEATURES), np.nan, dtype=np.float32)  # poisoned until overwritten
    result = triton.infer(MODEL, [make_input(data)], outputs=[grpcclient.InferRequestedOutput(OUTPUT)],
                          client_timeout=CALL_TIMEOUT_S)
    output[...] = result.as_numpy(OUTPUT)
    assert output.shape == (batch, OUT_FEATURES)
    np.testing.assert_allclose(output, reference(ltserve_server.repo, data), rtol=RTOL, atol=ATOL)


def test_infer_bad_shape_is_invalid_argument(triton):
    bad = np.zeros((2, IN_FEATURES + 1), dtype=np.float32)
    with pytest.raises(grpcclient.InferenceServerException) as error:
        triton.infer(MODEL, [make_input(bad)], client_timeout=CALL_TIMEOUT_S)
    assert "INVALID_ARGUMENT" in str(error.value.status())
    assert triton.is_server_live()


def test_async_infer_matches_torch(triton, ltserve_server):
    results: queue.Queue = queue.Queue()
    batches = [fresh_inputs(b) for b in (1, 2, 5, 7)]
    for data in batches:
        triton.async_infer(MODEL, [make_input(data)],
                           callback=lambda result, error, data=data: results.put((data, result, error)),
                           client_timeout=CALL_TIMEOUT_S)
    for _ in batches:
        data, result, error = results.get(timeout=CALL_TIMEOUT_S)
        assert error is None, error
        np.testing.assert_allclose(result.as_numpy(OUTPUT), reference(ltserve_server.repo, data),
                                   rtol=RTOL, atol=ATOL)


# --- perf_analyzer ----------------------------------------------------------------------------

def perf_analyzer_command() -> tuple[list[str], dict[str, str]] | str:
    """The perf_analyzer binary and the environment it runs in, or why it cannot run here.

    The PyPI package `perf-analyzer` is an empty placeholder; the real binary ships in the
    tritonclient wheel (bin/perf_analyzer), linked against libb64 (Debian libb64-0d) and CUDA
    12's libcudart (PyPI nvidia-cuda-runtime-cu12), both installed by scripts/setup.sh."""
    binary = Path(sys.executable).parent / "perf_analyzer"
    if not binary.exists():
        found = shutil.which("perf_analyzer")
        if not found:
            return "perf_analyzer is not installed (it ships in the tritonclient wheel)"
        binary = Path(found)
    env = dict(os.environ)
    try:
        import nvidia.cuda_runtime  # noqa: F401  (CUDA 12 runtime; no GPU is needed to load it)
        cudart_dirs = [str(Path(p) / "lib") for p in nvidia.cuda_runtime.__path__]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(cudart_dirs + [env.get("LD_LIBRARY_PATH", "")])
    except ImportError:
        pass
    probe = subprocess.run([str(binary), "--help"], capture_output=True, text=True, env=env, timeout=60)
    loader_error = re.search(r"error while loading shared libraries: (\S+)", probe.stderr)
    if loader_error:
        return f"perf_analyzer cannot start here: missing shared library {loader_error.group(1)}"
    return [str(binary)], env


def test_perf_analyzer_concurrency_1_to_4(ltserve_server, tmp_path):
    found = perf_analyzer_command()
    if isinstance(found, str):
        pytest.skip(found)
    command, env = found
    csv = tmp_path / "pa.csv"
    run = subprocess.run(
        command + ["-m", MODEL, "-u", ltserve_server.grpc_address, "-i", "grpc", "-b", "1",
                   "--concurrency-range", "1:4", "--measurement-interval", str(PA_WINDOW_MS),
                   "--stability-percentage", str(PA_STABILITY_PCT), "--max-trials", "10", "-f", str(csv)],
        capture_output=True, text=True, env=env, timeout=PA_RUN_TIMEOUT_S)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert not re.search(r"(?i)\berror\b", output), output
    levels = re.findall(r"Concurrency: (\d+), throughput: ([\d.]+) infer/sec", output)
    assert [int(c) for c, _ in levels] == [1, 2, 3, 4], output
    assert all(float(t) > 0 for _, t in levels), output
    assert csv.exists() and csv.read_text().count("\n") >= 5


# --- ltserve's own tools against the same server ------------------------------------------------

def tool(ltserve_server, name: str) -> Path:
    sub = {"ltserve-cli": "cli", "ltserve-bench": "bench"}[name]
    path = Path(ltserve_server.binary_dir) / "client" / sub / name
    if not path.exists():
        pytest.fail(f"{path} is not built")
    return path


def test_cli_health_metadata_infer_stats(ltserve_server, tmp_path):
    cli = tool(ltserve_server, "ltserve-cli")
    url = ["-u", ltserve_server.grpc_address, "--timeout-ms", str(int(CALL_TIMEOUT_S * 1000))]
    health = subprocess.run([cli, *url, "health"], capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
    assert health.returncode == 0, health.stderr
    assert "live: true" in health.stdout and "ready: true" in health.stdout

    metadata = subprocess.run([cli, *url, "metadata", MODEL], capture_output=True, text=True,
                              timeout=CALL_TIMEOUT_S)
    assert metadata.returncode == 0, metadata.stderr
    assert f"{INPUT} FP32 [-1,{IN_FEATURES}]" in metadata.stdout
    assert f"max_batch_size: {MAX_BATCH}" in metadata.stdout

    data = fresh_inputs(3)
    sample_file = tmp_path / "input.bin"
    data.tofile(sample_file)
    infer = subprocess.run([cli, *url, "infer", MODEL, "--batch", "3", "--input-file", str(sample_file),
                            "--print"], capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
    assert infer.returncode == 0, infer.stderr
    line = next(l for l in infer.stdout.splitlines() if l.startswith(OUTPUT))
    assert f"FP32 [3,{OUT_FEATURES}]" in line
    values = np.array([float(v) for v in line.split(":", 1)[1].split()], dtype=np.float64)
    # The CLI prints 6 significant digits.
    np.testing.assert_allclose(values.reshape(3, OUT_FEATURES), reference(ltserve_server.repo, data),
                               rtol=1e-5, atol=1e-5)

    missing = subprocess.run([cli, *url, "metadata", "no_such_model"], capture_output=True, text=True,
                             timeout=CALL_TIMEOUT_S)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr

    stats = subprocess.run([cli, *url, "stats", MODEL], capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
    assert stats.returncode == 0, stats.stderr
    assert re.search(rf"^{MODEL}\s+\S+\s+[1-9]\d*", stats.stdout, re.M), stats.stdout


def test_bench_sweep_json_csv(ltserve_server, tmp_path):
    bench = tool(ltserve_server, "ltserve-bench")
    out_json, out_csv = tmp_path / "bench.json", tmp_path / "bench.csv"
    run = subprocess.run(
        [bench, "-u", ltserve_server.grpc_address, "-m", MODEL, "--concurrency", "1,4",
         "--warmup-ms", "200", "--window-ms", "500", "--max-windows", "4", "--stability-pct", "50",
         "--timeout-ms", str(int(CALL_TIMEOUT_S * 1000)), "--json", str(out_json), "--csv", str(out_csv)],
        capture_output=True, text=True, timeout=PA_RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "window 1/4" in run.stderr  # progress while it runs
    report = json.loads(out_json.read_text())
    assert [level["level"] for level in report["levels"]] == [1, 4]
    for level in report["levels"]:
        assert level["errors"] == 0
        assert level["throughput_infer_per_s"] > 0
        assert 0 < level["latency_us"]["p50"] <= level["latency_us"]["p99"]
        server = level["server_us"]
        assert server["requests"] > 0
        # The server's own request time cannot exceed what the client measured around it.
        assert 0 < server["request"] <= level["latency_us"]["avg"] * 1.05
        assert server["compute_infer"] > 0
    assert len(out_csv.read_text().strip().splitlines()) == 3


# --- the README's commands, as written ----------------------------------------------------------

def readme_command(program: str) -> list[str]:
    """The README's command line that runs `program`, split into words."""
    for line in (ROOT / "README.md").read_text().splitlines():
        words = line.split()
        if words and Path(words[0]).name == program:
            return words
    raise AssertionError(f"the README has no command running {program}")


def test_readme_perf_analyzer_command_runs_in_a_fresh_shell(ltserve_server):
    if not (Path(sys.executable).parent / "perf_analyzer").exists():
        pytest.skip("perf_analyzer is not installed (it ships in the tritonclient wheel)")
    words = readme_command("perf_analyzer")
    words = [ltserve_server.grpc_address if w == "localhost:8001" else w for w in words]
    # What a new terminal has: no library path from this suite or from a CUDA setup.
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    # Shorter windows than perf_analyzer's default keep the run short on a shared machine.
    run = subprocess.run(
        words + ["--measurement-interval", str(PA_WINDOW_MS),
                 "--stability-percentage", str(PA_STABILITY_PCT), "--max-trials", "10"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=PA_RUN_TIMEOUT_S)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Concurrency: 4, throughput:" in output, output


# --- the rest of Triton's protocol: priority, classification, repository index, log settings ---

LABELLED = "labelled_mlp"
LABELS = [f"class_{i}" for i in range(OUT_FEATURES)]


@pytest.fixture(scope="module")
def protocol_server(model_repo, tmp_path_factory):
    """A server of its own: its repository holds broken models on purpose, and the log-settings
    tests change its log level, which the suite-wide ltserve_server must keep."""
    repo = tmp_path_factory.mktemp("protocol-repo")
    shutil.copytree(model_repo / MODEL, repo / MODEL)
    shutil.copytree(model_repo / MODEL, repo / LABELLED)
    config = (repo / LABELLED / "config.pbtxt").read_text()
    config = config.replace(f'name: "{MODEL}"', f'name: "{LABELLED}"')
    labelled = config.replace(f'name: "{OUTPUT}"', f'name: "{OUTPUT}" label_filename: "labels.txt"')
    assert labelled != config, config
    (repo / LABELLED / "config.pbtxt").write_text(labelled)
    (repo / LABELLED / "labels.txt").write_text("\n".join(LABELS) + "\n")
    # A label file that is not there: the model is UNAVAILABLE, saying so.
    shutil.copytree(repo / LABELLED, repo / "missing_labels")
    (repo / "missing_labels" / "labels.txt").unlink()
    (repo / "missing_labels" / "config.pbtxt").write_text(
        labelled.replace(f'name: "{LABELLED}"', 'name: "missing_labels"'))
    (repo / "broken").mkdir()
    (repo / "broken" / "config.pbtxt").write_text("this is not a model configuration\n")
    server = start_server(repo)
    yield server
    server.terminate()


@pytest.fixture()
def protocol_triton(protocol_server):
    client = grpcclient.InferenceServerClient(url=protocol_server.grpc_address)
    yield client
    client.close()


def expect_invalid_argument(call, *fragments):
    with pytest.raises(grpcclient.InferenceServerException) as error:
        call()
    assert "INVALID_ARGUMENT" in str(error.value.status()), error.value
    for fragment in fragments:
        assert fragment in error.value.message(), error.value.message()


def test_priority_and_timeout_as_tritonclient_sends_them(triton, ltserve_server):
    # tritonclient sends priority as uint64_param and timeout as int64_param.
    data = fresh_inputs(2)
    result = triton.infer(MODEL, [make_input(data)], priority=1, timeout=10_000_000,
                          client_timeout=CALL_TIMEOUT_S)
    np.testing.assert_allclose(result.as_numpy(OUTPUT), reference(ltserve_server.repo, data),
                               rtol=RTOL, atol=ATOL)


def test_priority_out_of_range_names_the_parameter(triton):
    expect_invalid_argument(
        lambda: triton.infer(MODEL, [make_input(fresh_inputs(1))], priority=2**32,
                             client_timeout=CALL_TIMEOUT_S),
        "parameter 'priority'", "[0, 4294967295]")


def test_classification_returns_value_colon_index(triton, ltserve_server):
    data = fresh_inputs(3)
    result = triton.infer(MODEL, [make_input(data)],
                          outputs=[grpcclient.InferRequestedOutput(OUTPUT, class_count=4)],
                          client_timeout=CALL_TIMEOUT_S)
    classes = result.as_numpy(OUTPUT)
    assert classes.shape == (3, 4)
    assert result.get_output(OUTPUT).datatype == "BYTES"
    expected = reference(ltserve_server.repo, data)
    for b, row in enumerate(classes):
        entries = [entry.decode().split(":") for entry in row]
        assert all(len(entry) == 2 for entry in entries), row
        indexes = [int(index) for _, index in entries]
        # Near-equal scores may swap between fp32 and the float64 reference; the values must
        # still be the scores of the classes named, in descending order, and the top ones.
        values = np.array([float(value) for value, _ in entries])
        np.testing.assert_allclose(values, expected[b][indexes], rtol=RTOL, atol=1e-5)
        assert list(values) == sorted(values, reverse=True)
        np.testing.assert_allclose(np.sort(expected[b])[::-1][:4], values, rtol=RTOL, atol=1e-5)


def test_classification_with_labels(protocol_triton, protocol_server):
    data = fresh_inputs(2)
    result = protocol_triton.infer(LABELLED, [make_input(data)],
                                   outputs=[grpcclient.InferRequestedOutput(OUTPUT, class_count=2)],
                                   client_timeout=CALL_TIMEOUT_S)
    classes = result.as_numpy(OUTPUT)
    assert classes.shape == (2, 2)
    for row in classes:
        for entry in row:
            value, index, label = entry.decode().split(":")
            assert label == LABELS[int(index)]
            float(value)


def test_classification_of_every_class(triton):
    # k may be the whole class dimension; the response's other fields stay as without it.
    result = triton.infer(MODEL, [make_input(fresh_inputs(1))],
                          outputs=[grpcclient.InferRequestedOutput(OUTPUT, class_count=OUT_FEATURES)],
                          client_timeout=CALL_TIMEOUT_S)
    response = result.get_response()
    assert response.model_name == MODEL
    assert [o.name for o in response.outputs] == [OUTPUT]
    assert response.outputs[0].datatype == "BYTES"
    assert list(response.outputs[0].shape) == [1, OUT_FEATURES]
    indexes = sorted(int(entry.decode().split(":")[1]) for entry in result.as_numpy(OUTPUT)[0])
    assert indexes == list(range(OUT_FEATURES))


def test_classification_larger_than_the_class_dimension_is_invalid(triton):
    expect_invalid_argument(
        lambda: triton.infer(MODEL, [make_input(fresh_inputs(1))],
                             outputs=[grpcclient.InferRequestedOutput(OUTPUT, class_count=OUT_FEATURES + 1)],
                             client_timeout=CALL_TIMEOUT_S),
        f"output '{OUTPUT}' has {OUT_FEATURES} classes", f"asks for {OUT_FEATURES + 1}")


def test_classification_count_must_be_positive(triton):
    expect_invalid_argument(
        lambda: triton.infer(MODEL, [make_input(fresh_inputs(1))],
                             outputs=[grpcclient.InferRequestedOutput(OUTPUT, class_count=-3)],
                             client_timeout=CALL_TIMEOUT_S),
        "parameter 'classification'")


def test_repository_index_lists_every_model_with_state_and_reason(protocol_triton):
    index = protocol_triton.get_model_repository_index(as_json=True, client_timeout=CALL_TIMEOUT_S)
    models = {m["name"]: m for m in index["models"]}
    assert set(models) == {MODEL, LABELLED, "missing_labels", "broken"}, index
    for name in (MODEL, LABELLED):
        assert models[name]["state"] == "READY"
        assert models[name]["version"] == "1"
        assert not models[name].get("reason")
    assert models["missing_labels"]["state"] == "UNAVAILABLE"
    assert "label_filename" in models["missing_labels"]["reason"]
    assert models["broken"]["state"] == "UNAVAILABLE"
    assert "config.pbtxt" in models["broken"]["reason"]


def test_repository_index_ready_filter_and_repository_name(protocol_server):
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(protocol_server.grpc_address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        ready = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True),
                                     timeout=CALL_TIMEOUT_S)
        assert sorted(m.name for m in ready.models) == sorted([MODEL, LABELLED])
        assert all(m.state == "READY" for m in ready.models)
        with pytest.raises(grpc.RpcError) as error:
            stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(repository_name="other"),
                                 timeout=CALL_TIMEOUT_S)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "repository_name" in error.value.details()


def test_log_settings_get_and_set(protocol_triton, protocol_server):
    settings = protocol_triton.get_log_settings(as_json=True, client_timeout=CALL_TIMEOUT_S)["settings"]
    assert settings["log_info"]["bool_param"] is True
    assert settings["log_warning"]["bool_param"] is True
    assert settings["log_error"]["bool_param"] is True
    assert settings["log_verbose_level"].get("uint32_param", 0) == 0
    assert settings["log_format"]["string_param"] == "ISO8601"
    assert "log_file" in settings

    # Verbose: the server's debug lines appear (a rejected request logs one).
    updated = protocol_triton.update_log_settings({"log_verbose_level": 1}, as_json=True,
                                                  client_timeout=CALL_TIMEOUT_S)["settings"]
    assert updated["log_verbose_level"]["uint32_param"] == 1
    bad = np.zeros((1, IN_FEATURES + 1), dtype=np.float32)
    with pytest.raises(grpcclient.InferenceServerException):
        protocol_triton.infer(MODEL, [make_input(bad)], client_timeout=CALL_TIMEOUT_S)
    protocol_server.wait_for_log(rf"debug ModelInfer '{MODEL}' rejected", 10)

    # Warnings and errors only.
    updated = protocol_triton.update_log_settings({"log_verbose_level": 0, "log_info": False},
                                                  as_json=True, client_timeout=CALL_TIMEOUT_S)["settings"]
    assert updated["log_info"]["bool_param"] is False
    assert updated["log_warning"]["bool_param"] is True
    assert protocol_triton.get_log_settings(as_json=True)["settings"]["log_info"]["bool_param"] is False
    protocol_triton.update_log_settings({"log_info": True}, client_timeout=CALL_TIMEOUT_S)
    assert protocol_triton.get_log_settings(as_json=True)["settings"]["log_info"]["bool_param"] is True


# (key, which field of SettingValue, value): tritonclient picks the field by the key's name, so
# wrong types are sent through the generated stub.
@pytest.mark.parametrize("settings, fragment", [
    ([("no_such_setting", "bool_param", True)], "unknown log setting 'no_such_setting'"),
    ([("log_info", "uint32_param", 1)], "'log_info' must be a bool_param"),
    ([("log_verbose_level", "bool_param", True)], "'log_verbose_level' must be a uint32_param"),
    ([("log_verbose_level", None, None)], "'log_verbose_level' must be a uint32_param"),
    ([("log_file", "string_param", "/tmp/ltserve.log")], "'log_file' can only be"),
    ([("log_format", "string_param", "default")], "'log_format' can only be \"ISO8601\""),
    ([("log_format", "bool_param", True)], "'log_format' must be a string_param"),
    ([("log_info", "bool_param", False), ("log_verbose_level", "uint32_param", 1)], "one threshold"),
    ([("log_error", "bool_param", False)], "one threshold"),
    # One bad key in a request changes none of the others.
    ([("log_info", "bool_param", False), ("bogus", "bool_param", True)], "unknown log setting 'bogus'"),
])
def test_log_settings_errors_change_nothing(protocol_triton, protocol_server, settings, fragment):
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    before = protocol_triton.get_log_settings(as_json=True, client_timeout=CALL_TIMEOUT_S)
    request = service_pb2.LogSettingsRequest()
    for key, field_name, value in settings:
        entry = request.settings[key]
        if field_name is not None:
            setattr(entry, field_name, value)
    with grpc.insecure_channel(protocol_server.grpc_address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.LogSettings(request, timeout=CALL_TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in error.value.details(), error.value.details()
    assert protocol_triton.get_log_settings(as_json=True, client_timeout=CALL_TIMEOUT_S) == before


def test_log_settings_unknown_key_through_tritonclient(protocol_triton):
    expect_invalid_argument(lambda: protocol_triton.update_log_settings({"log_colour": True}),
                            "unknown log setting 'log_colour'")
