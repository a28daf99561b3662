"""Model control as Triton does it, through NVIDIA's tritonclient.grpc: --model-control-mode
none|explicit|poll, RepositoryIndex/ModelLoad/ModelUnload, a config override in the load
request, version_policy with versions side by side, and reloads and unloads under load."""
from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.error
import urllib.request

import pytest

grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

from ltserve_testing import start_server  # noqa: E402
from model_control_support import (  # noqa: E402
    add_version, append_config, export_demo_models, index_rows, make_repo, server_rss_bytes,
    tiny_config_json, tiny_inputs, wait_until)

POLL_SECS = "0.2"
REFUSED_CONTROL = "explicit model load / unload is not allowed if polling is enabled"


@pytest.fixture(scope="module")
def demo_source():
    source = export_demo_models()
    yield source
    shutil.rmtree(source, ignore_errors=True)


@pytest.fixture()
def serve(tmp_path, demo_source):
    """serve(models, *flags, prepare=None) -> (server, client); stopped after the test."""
    started = []

    def _serve(models, *flags, prepare=None):
        repo = make_repo(demo_source, tmp_path, models)
        if prepare is not None:
            prepare(repo)
        server = start_server(repo, *flags)
        started.append(server)
        return server, grpcclient.InferenceServerClient(server.grpc_address)

    yield _serve
    for server in started:
        # Exits 0: every accepted request answered, every retired model released cleanly.
        assert server.terminate() == 0, server.log()[-4000:]


def metric_value(server, name: str, **labels) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def explicit(*models: str) -> list[str]:
    flags = ["--model-control-mode", "explicit"]
    for model in models:
        flags += ["--load-model", model]
    return flags


def test_mode_none_refuses_load_and_unload_as_triton_does(serve):
    _, client = serve(["tiny_mlp"])
    for call in (client.load_model, client.unload_model):
        with pytest.raises(InferenceServerException) as refused:
            call("tiny_mlp")
        assert refused.value.status() == "StatusCode.UNAVAILABLE"
        assert REFUSED_CONTROL in refused.value.message()
    assert client.is_model_ready("tiny_mlp")


def test_explicit_mode_loads_only_the_named_models_at_start(serve):
    _, client = serve(["tiny_mlp", "demo_mlp"], *explicit("tiny_mlp"))
    rows = index_rows(client)
    assert rows[("tiny_mlp", "1")] == ("READY", "")
    assert rows[("demo_mlp", "")] == ("", "")  # in the repository, never loaded
    assert not client.is_model_ready("demo_mlp")
    assert client.is_server_ready()  # every model asked to load is ready
    with pytest.raises(InferenceServerException) as not_loaded:
        client.infer("demo_mlp", tiny_inputs(grpcclient))
    assert not_loaded.value.status() == "StatusCode.UNAVAILABLE"


def test_load_model_star_loads_every_model(serve):
    _, client = serve(["tiny_mlp", "demo_mlp"], *explicit("*"))
    assert client.is_model_ready("tiny_mlp") and client.is_model_ready("demo_mlp")


def test_load_and_unload_change_index_readiness_and_metrics(serve):
    server, client = serve(["tiny_mlp", "demo_mlp"], *explicit())
    client.load_model("tiny_mlp")
    assert index_rows(client)[("tiny_mlp", "1")] == ("READY", "")
    assert client.is_model_ready("tiny_mlp")
    assert client.infer("tiny_mlp", tiny_inputs(grpcclient)).as_numpy("OUTPUT__0").shape == (1, 4)
    assert metric_value(server, "ltserve_model_ready", model="tiny_mlp", version="1") == 1
    assert [m["name"] for m in client.get_inference_statistics(as_json=True)["model_stats"]] == [
        "tiny_mlp"]

    client.unload_model("tiny_mlp")
    assert index_rows(client)[("tiny_mlp", "1")] == ("UNAVAILABLE", "unloaded")
    assert not client.is_model_ready("tiny_mlp")
    assert metric_value(server, "ltserve_model_ready", model="tiny_mlp", version="1") == 0
    with pytest.raises(InferenceServerException) as unloaded:
        client.infer("tiny_mlp", tiny_inputs(grpcclient))
    assert unloaded.value.status() == "StatusCode.UNAVAILABLE"
    assert "unloaded" in unloaded.value.message()
    assert client.get_inference_statistics(as_json=True).get("model_stats", []) == []


def test_index_with_ready_lists_only_ready_versions(serve):
    # tritonclient does not send `ready`; its generated stubs do (the project's own stubs would
    # clash with tritonclient's model_config.proto in one process).
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    server, _ = serve(["tiny_mlp", "demo_mlp"], *explicit("tiny_mlp"))
    with grpc.insecure_channel(server.grpc_address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        ready_only = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True))
        everything = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest())
    assert [(m.name, m.version, m.state) for m in ready_only.models] == [("tiny_mlp", "1", "READY")]
    assert [m.name for m in everything.models] == ["demo_mlp", "tiny_mlp"]


def http_status(server, path: str) -> int:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}").status
    except urllib.error.HTTPError as error:
        return error.code


def test_readiness_and_grpc_health_follow_a_failed_load_and_its_unload(serve):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    server, client = serve(["tiny_mlp"], *explicit())
    with grpc.insecure_channel(server.grpc_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)

        def serving():
            return health.Check(health_pb2.HealthCheckRequest(service="")).status == \
                health_pb2.HealthCheckResponse.SERVING

        assert serving() and http_status(server, "/v2/health/ready") == 200
        wrong_width = tiny_config_json(input=[{"name": "INPUT__0", "data_type": "TYPE_FP32",
                                               "dims": [3]}])
        with pytest.raises(InferenceServerException):
            client.load_model("tiny_mlp", config=wrong_width)
        # Strict readiness: a model asked to load did not.
        assert not client.is_server_ready() and not serving()
        assert http_status(server, "/v2/health/ready") == 503
        assert http_status(server, "/v2/models/tiny_mlp/ready") == 503
        client.load_model("tiny_mlp")
        assert client.is_server_ready() and serving()
        assert http_status(server, "/v2/models/tiny_mlp/ready") == 200
        client.unload_model("tiny_mlp")
        assert client.is_server_ready() and serving()  # an unloaded model no longer counts
        assert http_status(server, "/v2/models/tiny_mlp/ready") == 503


def test_load_of_a_model_the_repository_lacks_is_not_found(serve):
    _, client = serve(["tiny_mlp"], *explicit())
    with pytest.raises(InferenceServerException) as missing:
        client.load_model("no_such_model")
    assert missing.value.status() == "StatusCode.NOT_FOUND"
    assert "no_such_model" in missing.value.message()


def test_load_with_a_config_override_uses_it_instead_of_config_pbtxt(serve):
    _, client = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    client.load_model("tiny_mlp", config=tiny_config_json(max_batch_size=2))
    assert client.get_model_config("tiny_mlp").config.max_batch_size == 2
    with pytest.raises(InferenceServerException) as too_big:
        client.infer("tiny_mlp", tiny_inputs(grpcclient, batch=3))
    assert too_big.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "max_batch_size 2" in too_big.value.message()
    client.load_model("tiny_mlp")  # back to config.pbtxt: the override is not kept
    assert client.get_model_config("tiny_mlp").config.max_batch_size == 256
    assert client.infer("tiny_mlp", tiny_inputs(grpcclient, batch=3)) is not None


@pytest.mark.parametrize("config, expected", [
    ("{not json", "is not a ModelConfig in JSON"),
    ('{"max_batch_size": 2, "optimization": {}}', "optimization"),
])
def test_a_bad_config_override_is_invalid_argument_and_the_model_keeps_serving(
        serve, config, expected):
    _, client = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    with pytest.raises(InferenceServerException) as refused:
        client.load_model("tiny_mlp", config=config)
    assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert expected in refused.value.message()
    assert client.is_model_ready("tiny_mlp")


# --- the same control over HTTP (tritonclient.http) ---------------------------------------------

def http_client(server):
    import tritonclient.http as httpclient
    return httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")


@pytest.fixture(scope="module")
def explicit_tiny_server(tmp_path_factory, demo_source):
    """One explicit-mode server for the cases that change nothing (a server start each would
    cost more than the cases)."""
    server = start_server(make_repo(demo_source, tmp_path_factory.mktemp("explicit")),
                          *explicit("tiny_mlp"))
    yield server
    assert server.terminate() == 0, server.log()[-4000:]


def post_control(server, path: str, body: bytes) -> tuple[int, str]:
    """A raw POST; (status, the error message or the body)."""
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=body,
                                     method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]


def test_http_load_and_unload_change_what_both_protocols_serve(serve):
    import tritonclient.http as httpclient

    server, grpc_client = serve(["tiny_mlp", "demo_mlp"], *explicit())
    client = http_client(server)
    assert not client.is_model_ready("tiny_mlp")
    client.load_model("tiny_mlp")
    assert client.is_model_ready("tiny_mlp") and grpc_client.is_model_ready("tiny_mlp")
    assert index_rows(grpc_client)[("tiny_mlp", "1")] == ("READY", "")
    assert client.infer("tiny_mlp", tiny_inputs(httpclient)).as_numpy("OUTPUT__0").shape == (1, 4)
    client.unload_model("tiny_mlp", unload_dependents=True)
    assert not client.is_model_ready("tiny_mlp") and not grpc_client.is_model_ready("tiny_mlp")
    assert index_rows(grpc_client)[("tiny_mlp", "1")] == ("UNAVAILABLE", "unloaded")
    with pytest.raises(InferenceServerException) as unloaded:
        client.infer("tiny_mlp", tiny_inputs(httpclient))
    assert unloaded.value.status() == "503" and "unloaded" in unloaded.value.message()


def test_http_load_answers_an_empty_200_once_the_model_serves(serve):
    server, grpc_client = serve(["tiny_mlp"], *explicit())
    assert post_control(server, "/v2/repository/models/tiny_mlp/load", b"") == (200, "")
    assert grpc_client.is_model_ready("tiny_mlp")  # no wait: the load was over
    assert post_control(server, "/v2/repository/models/tiny_mlp/unload", b"{}") == (200, "")
    assert not grpc_client.is_model_ready("tiny_mlp")


def test_http_load_with_a_config_override_uses_it(serve):
    server, _ = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    client = http_client(server)
    client.load_model("tiny_mlp", config=tiny_config_json(max_batch_size=2))
    assert client.get_model_config("tiny_mlp")["max_batch_size"] == 2
    client.load_model("tiny_mlp")
    assert client.get_model_config("tiny_mlp")["max_batch_size"] == 256


def test_http_load_of_a_model_the_repository_lacks_is_404(serve):
    server, _ = serve(["tiny_mlp"], *explicit())
    with pytest.raises(InferenceServerException) as missing:
        http_client(server).load_model("no_such_model")
    assert missing.value.status() == "404" and "no_such_model" in missing.value.message()


def test_http_load_with_a_bad_config_is_400_and_the_model_keeps_serving(serve):
    server, grpc_client = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    with pytest.raises(InferenceServerException) as refused:
        http_client(server).load_model("tiny_mlp", config="{not json")
    assert refused.value.status() == "400"
    assert "is not a ModelConfig in JSON" in refused.value.message()
    assert grpc_client.is_model_ready("tiny_mlp")


@pytest.mark.parametrize("action, body, expected", [
    ("load", b"[1]", "must be an object"),
    ("load", b'{"parameters": 3}', "'parameters' in the model load JSON must be an object"),
    ("load", b'{"parameters": {"config": {"max_batch_size": 2}}}', "parameter 'config' must be"),
    ("load", b'{"parameters": {"config": 7}}', "'config' must be a string_param"),
    ("load", b'{"parameters": {"file:1/model.pt": "AAAA"}}', "model files in the request"),
    ("load", b"{not json", "model load JSON"),
    ("unload", b'{"parameters": {"unload_dependents": "yes"}}', "must be a bool_param"),
    ("unload", b'{"parameters": {"config": "{}"}}', "the only parameter is 'unload_dependents'"),
])
def test_http_control_bodies_it_cannot_honour_are_400_naming_why(
        explicit_tiny_server, action, body, expected):
    server = explicit_tiny_server
    status, message = post_control(server, f"/v2/repository/models/tiny_mlp/{action}", body)
    assert status == 400 and expected in message, message
    # Refused before anything changed.
    assert grpcclient.InferenceServerClient(server.grpc_address).is_model_ready("tiny_mlp")


def test_a_failed_reload_keeps_the_old_version_serving(serve):
    _, client = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    wrong_width = tiny_config_json(input=[{"name": "INPUT__0", "data_type": "TYPE_FP32",
                                           "dims": [3]}])
    with pytest.raises(InferenceServerException) as failed:
        client.load_model("tiny_mlp", config=wrong_width)
    assert "failed to load 'tiny_mlp'" in failed.value.message()
    assert client.is_model_ready("tiny_mlp")
    assert client.infer("tiny_mlp", tiny_inputs(grpcclient)) is not None


def three_versions(policy: str):
    def prepare(repo):
        add_version(repo, "tiny_mlp", 2)
        add_version(repo, "tiny_mlp", 3)
        append_config(repo, "tiny_mlp", policy)
    return prepare


def test_version_policy_all_serves_every_version_side_by_side(serve):
    _, client = serve(["tiny_mlp"], prepare=three_versions("version_policy { all {} }"))
    rows = index_rows(client)
    assert [rows[("tiny_mlp", v)][0] for v in "123"] == ["READY"] * 3
    for version in "123":
        response = client.infer("tiny_mlp", tiny_inputs(grpcclient), model_version=version)
        assert response.get_response().model_version == version
        assert client.is_model_ready("tiny_mlp", version)
    assert client.infer("tiny_mlp", tiny_inputs(grpcclient)).get_response().model_version == "3"
    assert list(client.get_model_metadata("tiny_mlp").versions) == ["1", "2", "3"]
    stats = client.get_inference_statistics("tiny_mlp", as_json=True)["model_stats"]
    assert sorted(s["version"] for s in stats) == ["1", "2", "3"]


def test_a_version_that_does_not_exist_is_not_found_with_tritons_message(serve):
    _, client = serve(["tiny_mlp"], prepare=three_versions("version_policy { latest { num_versions: 2 } }"))
    rows = index_rows(client)
    assert rows[("tiny_mlp", "3")][0] == "READY" and rows[("tiny_mlp", "2")][0] == "READY"
    assert ("tiny_mlp", "1") not in rows
    with pytest.raises(InferenceServerException) as unknown:
        client.infer("tiny_mlp", tiny_inputs(grpcclient), model_version="1")
    assert unknown.value.status() == "StatusCode.NOT_FOUND"
    assert unknown.value.message() == "Request for unknown model: 'tiny_mlp' version 1 is not found"
    with pytest.raises(InferenceServerException) as not_a_number:
        client.infer("tiny_mlp", tiny_inputs(grpcclient), model_version="latest")
    assert not_a_number.value.status() == "StatusCode.INVALID_ARGUMENT"


def test_a_version_dropped_by_a_reload_is_unloaded_and_not_ready(serve):
    _, client = serve(["tiny_mlp"], *explicit("tiny_mlp"),
                      prepare=three_versions("version_policy { all {} }"))
    client.load_model("tiny_mlp", config=tiny_config_json(
        version_policy={"specific": {"versions": [1, 3]}}))
    rows = index_rows(client)
    assert rows[("tiny_mlp", "1")] == ("READY", "") and rows[("tiny_mlp", "3")] == ("READY", "")
    assert rows[("tiny_mlp", "2")] == ("UNAVAILABLE", "unloaded")
    with pytest.raises(InferenceServerException) as not_ready:
        client.infer("tiny_mlp", tiny_inputs(grpcclient), model_version="2")
    assert not_ready.value.status() == "StatusCode.UNAVAILABLE"
    assert "version 2 is not at ready state" in not_ready.value.message()


class Load:
    """Clients sending tiny_mlp requests back to back until stopped; every outcome recorded."""

    def __init__(self, address: str, clients: int = 4):
        self.successes = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(address,)) for _ in range(clients)]
        for thread in self._threads:
            thread.start()

    def _run(self, address):
        client = grpcclient.InferenceServerClient(address)
        while not self._stop.is_set():
            try:
                client.infer("tiny_mlp", tiny_inputs(grpcclient))
                with self._lock:
                    self.successes += 1
            except InferenceServerException as error:
                with self._lock:
                    self.failures.append(f"{error.status()} {error.message()}")

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join()


def test_reloading_under_load_fails_no_request(serve):
    server, client = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    load = Load(server.grpc_address)
    try:
        wait_until(lambda: load.successes > 20, "requests flowing")
        for _ in range(5):
            client.load_model("tiny_mlp")
        before = load.successes
        wait_until(lambda: load.successes > before + 20, "requests flowing after the reloads")
    finally:
        load.stop()
    assert load.failures == []


def test_unloading_under_load_finishes_every_accepted_request(serve):
    server, client = serve(["tiny_mlp"], *explicit())
    # Requests wait in the queue for a batch: they are accepted, not yet run, at the unload.
    client.load_model("tiny_mlp", config=tiny_config_json(
        dynamic_batching={"max_queue_delay_microseconds": 400000}))
    results = []
    done = threading.Event()
    sent = 8

    def collect(result, error):
        results.append((result, error))
        if len(results) == sent:
            done.set()

    for _ in range(sent):
        client.async_infer("tiny_mlp", tiny_inputs(grpcclient), collect)
    wait_until(lambda: metric_value(server, "ltserve_pending_requests", model="tiny_mlp") == sent,
               "every request accepted and queued")
    client.unload_model("tiny_mlp")
    assert done.wait(30)
    assert [error for _, error in results] == [None] * sent
    with pytest.raises(InferenceServerException) as after:
        client.infer("tiny_mlp", tiny_inputs(grpcclient))
    assert after.value.status() == "StatusCode.UNAVAILABLE"


def test_unload_under_load_fails_only_requests_arriving_after_it(serve):
    server, client = serve(["tiny_mlp"], *explicit("tiny_mlp"))
    load = Load(server.grpc_address)
    try:
        wait_until(lambda: load.successes > 20, "requests flowing")
        client.unload_model("tiny_mlp")
        wait_until(lambda: len(load.failures) > 4, "requests refused after the unload")
    finally:
        load.stop()
    # Refused at arrival because the model is unloaded: never cancelled, never an internal error.
    assert all(f.startswith("StatusCode.UNAVAILABLE") and "unloaded" in f for f in load.failures), \
        load.failures[:5]


def test_poll_mode_loads_new_models_and_unloads_removed_ones(serve, demo_source):
    server, client = serve(["tiny_mlp"], "--model-control-mode", "poll",
                           "--repository-poll-secs", POLL_SECS)
    with pytest.raises(InferenceServerException) as refused:
        client.load_model("tiny_mlp")
    assert REFUSED_CONTROL in refused.value.message()

    shutil.copytree(demo_source / "demo_mlp", server.repo / "demo_mlp")
    wait_until(lambda: index_rows(client).get(("demo_mlp", "1"), ("",))[0] == "READY",
               "demo_mlp loaded by the poll")
    assert client.is_model_ready("demo_mlp")
    add_version(server.repo, "tiny_mlp", 2)
    wait_until(lambda: index_rows(client).get(("tiny_mlp", "2"), ("",))[0] == "READY",
               "tiny_mlp version 2 loaded by the poll")
    assert index_rows(client)[("tiny_mlp", "1")] == ("UNAVAILABLE", "unloaded")
    shutil.rmtree(server.repo / "demo_mlp")
    wait_until(lambda: all(name != "demo_mlp" for name, _ in index_rows(client)),
               "demo_mlp gone from the index")
    assert client.is_model_ready("tiny_mlp")


LOAD_UNLOAD_CYCLES = 100
WARM_UP_CYCLES = 10
# demo_mlp's weights alone are 1.3 MB: one leaked model a cycle would add over 100 MiB across
# the measured cycles; allocator noise stays far below this.
CYCLED_MODEL, CYCLED_INPUT_WIDTH = "demo_mlp", 128
RSS_GROWTH_LIMIT_BYTES = 24 << 20
# The GPU executor's workspace and buffers are several MiB a model on top of the weights.
GPU_GROWTH_LIMIT_BYTES = 64 << 20
RELEASE_SETTLE_S = 0.2  # an unload's release runs on the repository's own thread


def memory_growth_over_cycles(client, measure) -> int:
    """How much `measure()` grew across the cycles after the warm-up ones."""
    def cycle():
        client.load_model(CYCLED_MODEL)
        client.infer(CYCLED_MODEL, tiny_inputs(grpcclient, batch=8, width=CYCLED_INPUT_WIDTH))
        client.unload_model(CYCLED_MODEL)

    for _ in range(WARM_UP_CYCLES):
        cycle()
    time.sleep(RELEASE_SETTLE_S)
    baseline = measure()
    for _ in range(LOAD_UNLOAD_CYCLES - WARM_UP_CYCLES):
        cycle()
    time.sleep(RELEASE_SETTLE_S)
    return measure() - baseline


def test_a_hundred_load_unload_cycles_keep_the_servers_memory_flat(serve):
    server, client = serve([CYCLED_MODEL], *explicit())
    growth = memory_growth_over_cycles(client, lambda: server_rss_bytes(server.process.pid))
    assert growth < RSS_GROWTH_LIMIT_BYTES, f"RSS grew by {growth / 2**20:.1f} MiB"


def test_a_hundred_load_unload_cycles_keep_gpu_memory_flat(serve):
    """Triton's server#5841: GPU memory creeping up over reloads. Runs where the server sees a
    GPU (scripts/gpu.sh); the model is loaded KIND_GPU so the fused executor is the one cycled."""
    server, client = serve([CYCLED_MODEL], *explicit())
    if metric_value(server, "ltserve_gpu_memory_used_bytes") is None:
        pytest.skip("no GPU: the server exports no ltserve_gpu_memory_used_bytes")
    config = server.repo / CYCLED_MODEL / "config.pbtxt"
    config.write_text(config.read_text().replace("kind: KIND_AUTO", "kind: KIND_GPU"))
    growth = memory_growth_over_cycles(
        client, lambda: metric_value(server, "ltserve_gpu_memory_used_bytes"))
    assert growth < GPU_GROWTH_LIMIT_BYTES, f"GPU memory grew by {growth / 2**20:.1f} MiB"


def rezip_deflated(model_file, declare_size_of: str | None = None, declared: int = 0) -> None:
    """Rewrites a TorchScript archive with every record deflated; with `declare_size_of`, that
    record's central-directory entry claims `declared` uncompressed bytes instead."""
    import zipfile
    with zipfile.ZipFile(model_file) as source:
        records = [(info.filename, source.read(info.filename)) for info in source.infolist()]
    with zipfile.ZipFile(model_file, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name, data in records:
            out.writestr(name, data)
    if declare_size_of is None:
        return
    raw = bytearray(model_file.read_bytes())
    name = next(n for n, _ in records if n.endswith("/" + declare_size_of)).encode()
    entry = raw.find(b"PK\x01\x02")  # central-directory entries, the name 46 bytes in
    while entry >= 0 and raw[entry + 46:entry + 46 + len(name)] != name:
        entry = raw.find(b"PK\x01\x02", entry + 4)
    assert entry >= 0, f"no central-directory entry for {name!r}"
    raw[entry + 24:entry + 28] = declared.to_bytes(4, "little")  # uncompressed size
    model_file.write_bytes(bytes(raw))


def test_a_deflated_archive_loads_and_one_declaring_gigabytes_is_refused_before_reading(serve):
    """libtorch allocates a record's declared size before inflating it: the loader refuses a
    declared size no archive of the file's size can hold, and the server keeps serving."""
    from model_control_support import copy_as

    def prepare(repo):
        copy_as(repo, "tiny_mlp", "tiny_deflated")
        rezip_deflated(repo / "tiny_deflated" / "1" / "model.pt")
        copy_as(repo, "tiny_mlp", "tiny_oversized")
        rezip_deflated(repo / "tiny_oversized" / "1" / "model.pt", "data.pkl", 2**31)

    server, client = serve(["tiny_mlp"], *explicit("tiny_mlp"), prepare=prepare)
    client.load_model("tiny_deflated")
    inputs = tiny_inputs(grpcclient, batch=3)
    ours = client.infer("tiny_deflated", inputs).as_numpy("OUTPUT__0")
    reference = client.infer("tiny_mlp", inputs).as_numpy("OUTPUT__0")
    assert (ours == reference).all(), "the deflated copy of the same module answered otherwise"

    rss_before = server_rss_bytes(server.process.pid)
    with pytest.raises(InferenceServerException) as refused:
        client.load_model("tiny_oversized")
    message = refused.value.message()
    assert "data.pkl' declares 2147483648 bytes" in message, message
    assert "archive can hold" in message, message
    assert server_rss_bytes(server.process.pid) - rss_before < 256 << 20
    assert client.infer("tiny_mlp", inputs) is not None
