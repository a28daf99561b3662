"""The system and CUDA shared-memory extensions through NVIDIA's own clients: tritonclient's
shared_memory / cuda_shared_memory utilities and perf_analyzer --shared-memory, against the
real ltserve, as a Triton user would call them.

Runs in the pytest process of test_triton_clients.py (scripts/test.sh): tritonclient's generated
protos cannot share protobuf's descriptor pool with the ones the other suites generate."""
from __future__ import annotations

import re
import subprocess
import threading
import uuid

import numpy as np
import pytest

from test_triton_clients import (CALL_TIMEOUT_S, IN_FEATURES, INPUT, MODEL, OUT_FEATURES,
                                 OUTPUT, PA_RUN_TIMEOUT_S, PA_STABILITY_PCT, PA_WINDOW_MS,
                                 RTOL, ATOL, fresh_inputs, perf_analyzer_command, reference)

grpcclient = pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed")
shm = pytest.importorskip("tritonclient.utils.shared_memory",
                          reason="tritonclient's shared_memory utility is not installed")
from tritonclient.utils import InferenceServerException  # noqa: E402

BATCH = 3
# Bound for outputs computed in bf16 (the CUDA round trip on the GPU).
BF16_RTOL, BF16_ATOL = 2e-2, 5e-3
INPUT_BYTES = BATCH * IN_FEATURES * 4
OUTPUT_BYTES = BATCH * OUT_FEATURES * 4


@pytest.fixture()
def triton(ltserve_server):
    client = grpcclient.InferenceServerClient(url=ltserve_server.grpc_address)
    yield client
    client.unregister_system_shared_memory()
    client.close()


class Region:
    """A POSIX shm object made by tritonclient, under a name unique to this test."""

    def __init__(self, byte_size: int):
        self.name = f"ltserve-test-{uuid.uuid4().hex[:12]}"
        self.key = "/" + self.name
        self.byte_size = byte_size
        self.handle = shm.create_shared_memory_region(self.name, self.key, byte_size)

    def close(self):
        shm.destroy_shared_memory_region(self.handle)


@pytest.fixture()
def regions():
    made: list[Region] = []

    def make(byte_size: int) -> Region:
        made.append(Region(byte_size))
        return made[-1]

    yield make
    for region in made:
        region.close()


def shm_input(region: Region, byte_size: int = INPUT_BYTES, offset: int = 0, batch: int = BATCH):
    tensor = grpcclient.InferInput(INPUT, [batch, IN_FEATURES], "FP32")
    tensor.set_shared_memory(region.name, byte_size, offset)
    return tensor


def raw_input(data: np.ndarray):
    tensor = grpcclient.InferInput(INPUT, list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return tensor


def shm_output(region: Region, byte_size: int = OUTPUT_BYTES, offset: int = 0):
    tensor = grpcclient.InferRequestedOutput(OUTPUT)
    tensor.set_shared_memory(region.name, byte_size, offset)
    return tensor


def refused(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as error:
        call()
    return error.value


# --- registration ---------------------------------------------------------------------------

def test_register_status_lists_the_region(triton, regions):
    region = regions(4096)
    triton.register_system_shared_memory(region.name, region.key, 1024, offset=512)
    status = triton.get_system_shared_memory_status(region.name)
    entry = status.regions[region.name]
    assert (entry.name, entry.key, entry.offset, entry.byte_size) == (region.name, region.key, 512, 1024)
    assert region.name in triton.get_system_shared_memory_status().regions


def test_register_same_name_twice_is_already_exists(triton, regions):
    region = regions(1024)
    triton.register_system_shared_memory(region.name, region.key, 1024)
    error = refused(lambda: triton.register_system_shared_memory(region.name, region.key, 1024))
    assert error.status() == "StatusCode.ALREADY_EXISTS"
    assert f"shared memory region '{region.name}' already in manager" in error.message()


def test_register_unknown_key_is_invalid_argument(triton):
    error = refused(lambda: triton.register_system_shared_memory("nokey", "/ltserve-no-such-key", 64))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert "unable to open shared memory key '/ltserve-no-such-key'" in error.message()


def test_register_past_the_end_of_the_object_is_invalid_argument(triton, regions):
    region = regions(1024)
    error = refused(lambda: triton.register_system_shared_memory(region.name, region.key, 1000, offset=100))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert "outside key" in error.message() and "of 1024 bytes" in error.message()
    assert region.name not in triton.get_system_shared_memory_status().regions


def test_status_of_unknown_region_is_not_found(triton):
    error = refused(lambda: triton.get_system_shared_memory_status("never-registered"))
    assert error.status() == "StatusCode.NOT_FOUND"
    assert "never-registered" in error.message()


def test_unregister_all_removes_every_system_region(triton, regions):
    first, second = regions(1024), regions(1024)
    triton.register_system_shared_memory(first.name, first.key, 1024)
    triton.register_system_shared_memory(second.name, second.key, 1024)
    triton.unregister_system_shared_memory()
    assert len(triton.get_system_shared_memory_status().regions) == 0


def test_unregister_one_keeps_the_others(triton, regions):
    first, second = regions(1024), regions(1024)
    triton.register_system_shared_memory(first.name, first.key, 1024)
    triton.register_system_shared_memory(second.name, second.key, 1024)
    triton.unregister_system_shared_memory(first.name)
    assert list(triton.get_system_shared_memory_status().regions) == [second.name]


# --- inference through regions --------------------------------------------------------------

def test_input_and_output_in_shared_memory(triton, regions, ltserve_server):
    data = fresh_inputs(BATCH)
    region_in, region_out = regions(INPUT_BYTES), regions(OUTPUT_BYTES)
    shm.set_shared_memory_region(region_in.handle, [data])
    triton.register_system_shared_memory(region_in.name, region_in.key, INPUT_BYTES)
    triton.register_system_shared_memory(region_out.name, region_out.key, OUTPUT_BYTES)
    result = triton.infer(MODEL, [shm_input(region_in)], outputs=[shm_output(region_out)],
                          client_timeout=CALL_TIMEOUT_S)
    response = result.get_response()
    # The bytes went to the region: an empty entry keeps the output's place, as in Triton.
    assert list(response.raw_output_contents) == [b""]
    assert response.outputs[0].parameters["shared_memory_region"].string_param == region_out.name
    assert list(response.outputs[0].shape) == [BATCH, OUT_FEATURES]
    written = shm.get_contents_as_numpy(region_out.handle, np.float32, [BATCH, OUT_FEATURES])
    np.testing.assert_allclose(written, reference(ltserve_server.repo, data), rtol=RTOL, atol=ATOL)


def test_input_at_an_offset_inside_the_region(triton, regions, ltserve_server):
    data = fresh_inputs(BATCH)
    region = regions(256 + INPUT_BYTES)
    shm.set_shared_memory_region(region.handle, [data], offset=256)
    triton.register_system_shared_memory(region.name, region.key, region.byte_size)
    result = triton.infer(MODEL, [shm_input(region, offset=256)], client_timeout=CALL_TIMEOUT_S)
    np.testing.assert_allclose(result.as_numpy(OUTPUT), reference(ltserve_server.repo, data),
                               rtol=RTOL, atol=ATOL)


def test_raw_input_output_in_shared_memory(triton, regions, ltserve_server):
    data = fresh_inputs(BATCH)
    region_out = regions(OUTPUT_BYTES)
    triton.register_system_shared_memory(region_out.name, region_out.key, OUTPUT_BYTES)
    triton.infer(MODEL, [raw_input(data)], outputs=[shm_output(region_out)], client_timeout=CALL_TIMEOUT_S)
    written = shm.get_contents_as_numpy(region_out.handle, np.float32, [BATCH, OUT_FEATURES])
    np.testing.assert_allclose(written, reference(ltserve_server.repo, data), rtol=RTOL, atol=ATOL)


def test_shared_memory_input_raw_output(triton, regions, ltserve_server):
    data = fresh_inputs(BATCH)
    region_in = regions(INPUT_BYTES)
    shm.set_shared_memory_region(region_in.handle, [data])
    triton.register_system_shared_memory(region_in.name, region_in.key, INPUT_BYTES)
    result = triton.infer(MODEL, [shm_input(region_in)], outputs=[grpcclient.InferRequestedOutput(OUTPUT)],
                          client_timeout=CALL_TIMEOUT_S)
    np.testing.assert_allclose(result.as_numpy(OUTPUT), reference(ltserve_server.repo, data),
                               rtol=RTOL, atol=ATOL)


# --- every way a request can misuse a region ------------------------------------------------

def test_unknown_input_region_is_invalid_argument(triton, regions):
    ghost = regions(INPUT_BYTES)  # exists as shm, never registered
    error = refused(lambda: triton.infer(MODEL, [shm_input(ghost)], client_timeout=CALL_TIMEOUT_S))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"input '{INPUT}' names shared memory region '{ghost.name}', which is not registered" in error.message()


def test_input_past_the_end_of_the_region_is_invalid_argument(triton, regions):
    region = regions(INPUT_BYTES)
    triton.register_system_shared_memory(region.name, region.key, INPUT_BYTES)
    error = refused(lambda: triton.infer(MODEL, [shm_input(region, offset=4)], client_timeout=CALL_TIMEOUT_S))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"is outside region '{region.name}' of {INPUT_BYTES} bytes" in error.message()


def test_offset_at_the_end_of_the_region_is_invalid_argument(triton, regions):
    region = regions(INPUT_BYTES)
    triton.register_system_shared_memory(region.name, region.key, INPUT_BYTES)
    error = refused(lambda: triton.infer(MODEL, [shm_input(region, offset=INPUT_BYTES)],
                                         client_timeout=CALL_TIMEOUT_S))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"shared_memory_offset {INPUT_BYTES} " in error.message()


def test_input_byte_size_not_matching_the_shape_is_invalid_argument(triton, regions):
    region = regions(INPUT_BYTES)
    triton.register_system_shared_memory(region.name, region.key, INPUT_BYTES)
    error = refused(lambda: triton.infer(MODEL, [shm_input(region, byte_size=INPUT_BYTES - 4)],
                                         client_timeout=CALL_TIMEOUT_S))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"has shared_memory_byte_size {INPUT_BYTES - 4}" in error.message()
    assert f"needs {INPUT_BYTES}" in error.message()


def test_output_region_too_small_is_invalid_argument(triton, regions):
    data = fresh_inputs(BATCH)
    region_out = regions(OUTPUT_BYTES)
    triton.register_system_shared_memory(region_out.name, region_out.key, OUTPUT_BYTES)
    shm.set_shared_memory_region(region_out.handle, [np.full(BATCH * OUT_FEATURES, 7.0, np.float32)])
    error = refused(lambda: triton.infer(MODEL, [raw_input(data)],
                                         outputs=[shm_output(region_out, byte_size=OUTPUT_BYTES - 4)],
                                         client_timeout=CALL_TIMEOUT_S))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"output '{OUTPUT}' has {OUTPUT_BYTES} bytes" in error.message()
    assert f"shared_memory_byte_size {OUTPUT_BYTES - 4}" in error.message()
    # Nothing was written: the region still holds what the client put there.
    assert (shm.get_contents_as_numpy(region_out.handle, np.float32, [BATCH * OUT_FEATURES]) == 7.0).all()


def test_unknown_output_region_is_invalid_argument(triton):
    error = refused(lambda: triton.infer(MODEL, [raw_input(fresh_inputs(1))],
                                         outputs=[shm_output(type("R", (), {"name": "nowhere"})())],
                                         client_timeout=CALL_TIMEOUT_S))
    assert error.status() == "StatusCode.INVALID_ARGUMENT"
    assert f"output '{OUTPUT}' names shared memory region 'nowhere'" in error.message()


def test_unregister_while_requests_use_the_region(triton, regions, ltserve_server):
    """Requests in flight keep their mapping: each answers right or INVALID_ARGUMENT (region
    gone), and the server stays up."""
    data = fresh_inputs(BATCH)
    region_in = regions(INPUT_BYTES)
    shm.set_shared_memory_region(region_in.handle, [data])
    triton.register_system_shared_memory(region_in.name, region_in.key, INPUT_BYTES)
    expected = reference(ltserve_server.repo, data)
    outcomes: list[str] = []
    done = threading.Semaphore(0)

    def answered(result, error):
        if error is not None:
            outcomes.append(error.status() if "not registered" in error.message() else error.message())
        else:
            ok = np.allclose(result.as_numpy(OUTPUT), expected, rtol=RTOL, atol=ATOL)
            outcomes.append("ok" if ok else "wrong values")
        done.release()

    sent = 200
    for i in range(sent):
        triton.async_infer(MODEL, [shm_input(region_in)], answered, client_timeout=CALL_TIMEOUT_S)
        if i == sent // 2:
            triton.unregister_system_shared_memory(region_in.name)
    for _ in range(sent):
        assert done.acquire(timeout=CALL_TIMEOUT_S)
    assert set(outcomes) <= {"ok", "StatusCode.INVALID_ARGUMENT"}, set(outcomes)
    assert "ok" in outcomes and "StatusCode.INVALID_ARGUMENT" in outcomes
    assert triton.is_server_live()


# --- CUDA shared memory ---------------------------------------------------------------------

def gpu_visible() -> bool:
    import torch
    return torch.cuda.is_available()


def test_cuda_register_without_a_gpu_says_why(triton):
    if gpu_visible():
        pytest.skip("this machine has a GPU; test_cuda_shared_memory_round_trip covers it")
    error = refused(lambda: triton.register_cuda_shared_memory("cuda-region", b"\0" * 64, 0, 1024))
    assert error.status() == "StatusCode.UNAVAILABLE"
    assert "no usable GPU" in error.message() or "built without CUDA" in error.message()
    assert len(triton.get_cuda_shared_memory_status().regions) == 0


def test_cuda_shared_memory_round_trip(triton, ltserve_server):
    if not gpu_visible():
        pytest.skip("no GPU on this machine: CUDA shared memory needs one (scripts/gpu.sh runs this)")
    cudashm = pytest.importorskip("tritonclient.utils.cuda_shared_memory",
                                  reason="tritonclient's cuda_shared_memory needs cuda-python")
    data = fresh_inputs(BATCH)
    handle_in = cudashm.create_shared_memory_region("cuda-in", INPUT_BYTES, 0)
    handle_out = cudashm.create_shared_memory_region("cuda-out", OUTPUT_BYTES, 0)
    try:
        cudashm.set_shared_memory_region(handle_in, [data])
        triton.register_cuda_shared_memory("cuda-in", cudashm.get_raw_handle(handle_in), 0, INPUT_BYTES)
        triton.register_cuda_shared_memory("cuda-out", cudashm.get_raw_handle(handle_out), 0, OUTPUT_BYTES)
        assert set(triton.get_cuda_shared_memory_status().regions) == {"cuda-in", "cuda-out"}
        tensor = grpcclient.InferInput(INPUT, [BATCH, IN_FEATURES], "FP32")
        tensor.set_shared_memory("cuda-in", INPUT_BYTES)
        output = grpcclient.InferRequestedOutput(OUTPUT)
        output.set_shared_memory("cuda-out", OUTPUT_BYTES)
        triton.infer(MODEL, [tensor], outputs=[output], client_timeout=CALL_TIMEOUT_S)
        written = cudashm.get_contents_as_numpy(handle_out, np.float32, [BATCH, OUT_FEATURES])
        # On the GPU demo_mlp runs in bf16, the GPU's default precision (8 bits of mantissa: the
        # H200 gave 9.4e-4 at most against outputs of about 0.1); a region read at a wrong
        # offset or a missed write gives unrelated values, far outside this bound.
        np.testing.assert_allclose(written, reference(ltserve_server.repo, data),
                                   rtol=BF16_RTOL, atol=BF16_ATOL)
    finally:
        triton.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(handle_in)
        cudashm.destroy_shared_memory_region(handle_out)


def cuda_shared_memory_module():
    if not gpu_visible():
        pytest.skip("no GPU on this machine: CUDA shared memory needs one (scripts/gpu.sh runs this)")
    return pytest.importorskip("tritonclient.utils.cuda_shared_memory",
                               reason="tritonclient's cuda_shared_memory needs cuda-python")


def test_cuda_shared_memory_mixed_with_plain_requests_in_batches(triton, ltserve_server):
    """Requests with CUDA-region tensors batch with plain ones: the GPU executor reads those rows
    and writes those outputs in device memory itself, each at its own offset, while the others'
    rows go through host staging; every request must get exactly its own rows' outputs."""
    cudashm = cuda_shared_memory_module()
    threads, per_thread = 8, 12
    slots = threads * per_thread
    data = [fresh_inputs(BATCH) for _ in range(slots)]
    handle_in = cudashm.create_shared_memory_region("cuda-mixed-in", slots * INPUT_BYTES, 0)
    handle_out = cudashm.create_shared_memory_region("cuda-mixed-out", slots * OUTPUT_BYTES, 0)
    try:
        cudashm.set_shared_memory_region(handle_in, data)
        triton.register_cuda_shared_memory("cuda-mixed-in", cudashm.get_raw_handle(handle_in), 0,
                                           slots * INPUT_BYTES)
        triton.register_cuda_shared_memory("cuda-mixed-out", cudashm.get_raw_handle(handle_out), 0,
                                           slots * OUTPUT_BYTES)
        plain: dict[int, np.ndarray] = {}
        failures: list[str] = []

        def client(t: int):
            own = grpcclient.InferenceServerClient(url=ltserve_server.grpc_address)
            try:
                for i in range(per_thread):
                    slot = t * per_thread + i
                    # Slot by slot: input in the region, output in the region, both, or neither.
                    kind = slot % 4
                    if kind in (1, 3):
                        tensor = grpcclient.InferInput(INPUT, [BATCH, IN_FEATURES], "FP32")
                        tensor.set_shared_memory("cuda-mixed-in", INPUT_BYTES, slot * INPUT_BYTES)
                    else:
                        tensor = raw_input(data[slot])
                    output = grpcclient.InferRequestedOutput(OUTPUT)
                    if kind in (2, 3):
                        output.set_shared_memory("cuda-mixed-out", OUTPUT_BYTES, slot * OUTPUT_BYTES)
                    result = own.infer(MODEL, [tensor], outputs=[output], client_timeout=CALL_TIMEOUT_S)
                    if kind not in (2, 3):
                        plain[slot] = result.as_numpy(OUTPUT)
            except Exception as error:  # noqa: BLE001 - reported below with the thread
                failures.append(f"thread {t}: {error}")
            finally:
                own.close()

        workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert not failures, failures
        written = cudashm.get_contents_as_numpy(handle_out, np.float32, [slots * BATCH, OUT_FEATURES])
        for slot in range(slots):
            got = plain[slot] if slot % 4 not in (2, 3) else written[slot * BATCH:(slot + 1) * BATCH]
            np.testing.assert_allclose(got, reference(ltserve_server.repo, data[slot]),
                                       rtol=BF16_RTOL, atol=BF16_ATOL, err_msg=f"slot {slot}")
    finally:
        triton.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(handle_in)
        cudashm.destroy_shared_memory_region(handle_out)


def test_cuda_output_region_too_small_is_invalid_argument_and_left_alone(triton, ltserve_server):
    cudashm = cuda_shared_memory_module()
    data = fresh_inputs(BATCH)
    small = OUTPUT_BYTES - 4
    handle_out = cudashm.create_shared_memory_region("cuda-small-out", small, 0)
    try:
        poison = np.full(small // 4, np.nan, dtype=np.float32)
        cudashm.set_shared_memory_region(handle_out, [poison])
        triton.register_cuda_shared_memory("cuda-small-out", cudashm.get_raw_handle(handle_out), 0, small)
        output = grpcclient.InferRequestedOutput(OUTPUT)
        output.set_shared_memory("cuda-small-out", small)
        error = refused(lambda: triton.infer(MODEL, [raw_input(data)], outputs=[output],
                                             client_timeout=CALL_TIMEOUT_S))
        assert error.status() == "StatusCode.INVALID_ARGUMENT", error.message()
        assert f"was given shared_memory_byte_size {small}" in error.message(), error.message()
        assert np.isnan(cudashm.get_contents_as_numpy(handle_out, np.float32, [small // 4])).all()
        # The server goes on answering.
        plain = triton.infer(MODEL, [raw_input(data)], client_timeout=CALL_TIMEOUT_S)
        np.testing.assert_allclose(plain.as_numpy(OUTPUT), reference(ltserve_server.repo, data),
                                   rtol=BF16_RTOL, atol=BF16_ATOL)
    finally:
        triton.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(handle_out)


# --- perf_analyzer ----------------------------------------------------------------------------

def test_perf_analyzer_system_shared_memory(ltserve_server):
    found = perf_analyzer_command()
    if isinstance(found, str):
        pytest.skip(found)
    command, env = found
    run = subprocess.run(
        command + ["-m", MODEL, "-u", ltserve_server.grpc_address, "-i", "grpc", "-b", "2",
                   "--shared-memory", "system", "--concurrency-range", "1:2",
                   "--measurement-interval", str(PA_WINDOW_MS),
                   "--stability-percentage", str(PA_STABILITY_PCT), "--max-trials", "10"],
        capture_output=True, text=True, env=env, timeout=PA_RUN_TIMEOUT_S)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert not re.search(r"(?i)\berror\b", output), output
    levels = re.findall(r"Concurrency: (\d+), throughput: ([\d.]+) infer/sec", output)
    assert [int(c) for c, _ in levels] == [1, 2], output
    assert all(float(t) > 0 for _, t in levels), output


# --- the same over HTTP/REST ------------------------------------------------------------------

@pytest.fixture()
def triton_http(ltserve_server):
    httpclient = pytest.importorskip("tritonclient.http", reason="tritonclient[http] is not installed")
    client = httpclient.InferenceServerClient(url=f"127.0.0.1:{ltserve_server.http_port}")
    yield httpclient, client
    client.unregister_system_shared_memory()
    client.close()


def test_http_input_and_output_in_shared_memory(triton_http, regions, ltserve_server):
    httpclient, client = triton_http
    data = fresh_inputs(BATCH)
    region_in, region_out = regions(INPUT_BYTES), regions(OUTPUT_BYTES)
    shm.set_shared_memory_region(region_in.handle, [data])
    client.register_system_shared_memory(region_in.name, region_in.key, INPUT_BYTES)
    client.register_system_shared_memory(region_out.name, region_out.key, OUTPUT_BYTES)
    status = client.get_system_shared_memory_status()
    assert {entry["name"] for entry in status} == {region_in.name, region_out.name}
    tensor = httpclient.InferInput(INPUT, [BATCH, IN_FEATURES], "FP32")
    tensor.set_shared_memory(region_in.name, INPUT_BYTES)
    output = httpclient.InferRequestedOutput(OUTPUT)
    output.set_shared_memory(region_out.name, OUTPUT_BYTES)
    result = client.infer(MODEL, [tensor], outputs=[output])
    answered = result.get_output(OUTPUT)
    assert answered["parameters"]["shared_memory_region"] == region_out.name
    assert "data" not in answered and answered["shape"] == [BATCH, OUT_FEATURES]
    written = shm.get_contents_as_numpy(region_out.handle, np.float32, [BATCH, OUT_FEATURES])
    np.testing.assert_allclose(written, reference(ltserve_server.repo, data), rtol=RTOL, atol=ATOL)


def test_http_register_twice_and_unknown_region_are_400(triton_http, regions):
    httpclient, client = triton_http
    region = regions(INPUT_BYTES)
    client.register_system_shared_memory(region.name, region.key, INPUT_BYTES)
    again = refused(lambda: client.register_system_shared_memory(region.name, region.key, INPUT_BYTES))
    assert "already in manager" in again.message() and again.status() == "400"
    tensor = httpclient.InferInput(INPUT, [BATCH, IN_FEATURES], "FP32")
    tensor.set_shared_memory("not-registered", INPUT_BYTES)
    unknown = refused(lambda: client.infer(MODEL, [tensor]))
    assert unknown.status() == "400"
    assert "'not-registered', which is not registered" in unknown.message()
