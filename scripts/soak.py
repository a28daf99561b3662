"""Soak run of the real server: mixed inference load on two models, calls cancelled in flight,
calls with deadlines too short to meet, control calls and malformed requests, for --duration
seconds; then the server's resident memory and thread count at the start and the end, and every
answer counted by kind and status. scripts/soak.sh is the entry point.

Fails (exit 1) when the server dies or exits non-zero on SIGTERM, when any call gets a status
its kind never should (INTERNAL, UNKNOWN, UNAVAILABLE before the end, ...), when the thread
count grew, or when memory grew more than --max-rss-growth-mib."""
from __future__ import annotations

import argparse
import collections
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from ltserve_testing import export_models, start_server, stubs  # noqa: E402

MODELS = ("tiny_mlp", "demo_mlp")  # the demo set; their widths come from their metadata
CALL_TIMEOUT_S = 30.0
SAMPLE_EVERY_S = 10.0
# What each kind of call may answer; anything else is a finding.
ALLOWED = {
    "infer": {grpc.StatusCode.OK},
    "cancel": {grpc.StatusCode.OK, grpc.StatusCode.CANCELLED},
    "deadline": {grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED},
    "control": {grpc.StatusCode.OK},
    "malformed": {grpc.StatusCode.INVALID_ARGUMENT},
}


def proc_status(pid: int) -> tuple[int, int]:
    """(VmRSS in KiB, Threads) of the process."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return int(fields["VmRSS"][0]), int(fields["Threads"][0])


class Soak:
    def __init__(self, address: str, pb, widths: dict[str, tuple[int, int]], seed: int):
        self.pb = pb
        self.widths = widths
        self.channel = grpc.insecure_channel(address)
        self.stub = pb.service_grpc.GRPCInferenceServiceStub(self.channel)
        self.counts: collections.Counter = collections.Counter()
        self.unexpected: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.seed = seed

    def request(self, rng: random.Random, model: str, batch: int, width: int | None = None):
        width = width or self.widths[model][0]
        request = self.pb.service.ModelInferRequest(model_name=model)
        request.inputs.add(name="INPUT__0", datatype="FP32", shape=[batch, width])
        request.raw_input_contents.append(
            np.random.default_rng(rng.getrandbits(32)).random((batch, width), np.float32).tobytes())
        return request

    def record(self, kind: str, code: grpc.StatusCode, details: str = "") -> None:
        with self.lock:
            self.counts[(kind, code.name)] += 1
            if code not in ALLOWED[kind] and len(self.unexpected) < 20:
                self.unexpected.append(f"{kind}: {code.name} {details}")

    def call(self, kind: str, method, message, timeout: float = CALL_TIMEOUT_S) -> None:
        try:
            method(message, timeout=timeout)
            self.record(kind, grpc.StatusCode.OK)
        except grpc.RpcError as error:
            self.record(kind, error.code(), error.details() or "")

    def one(self, rng: random.Random) -> None:
        model = rng.choice(list(self.widths))
        pick = rng.random()
        if pick < 0.55:
            self.call("infer", self.stub.ModelInfer, self.request(rng, model, rng.randint(1, 64)))
        elif pick < 0.70:
            future = self.stub.ModelInfer.future(self.request(rng, model, rng.randint(1, 64)),
                                                 timeout=CALL_TIMEOUT_S)
            time.sleep(rng.uniform(0, 0.003))
            future.cancel()
            try:
                future.result()
                self.record("cancel", grpc.StatusCode.OK)
            except grpc.FutureCancelledError:
                self.record("cancel", grpc.StatusCode.CANCELLED)
            except grpc.RpcError as error:
                self.record("cancel", error.code(), error.details() or "")
        elif pick < 0.85:
            self.call("deadline", self.stub.ModelInfer,
                      self.request(rng, model, rng.randint(1, 64)), timeout=rng.uniform(0.0002, 0.004))
        elif pick < 0.95:
            service = self.pb.service
            method, message = rng.choice([
                (self.stub.ModelMetadata, service.ModelMetadataRequest(name=model)),
                (self.stub.ModelConfig, service.ModelConfigRequest(name=model)),
                (self.stub.ModelStatistics, service.ModelStatisticsRequest(name=model)),
                (self.stub.ServerReady, service.ServerReadyRequest()),
                (self.stub.RepositoryIndex, service.RepositoryIndexRequest()),
            ])
            self.call("control", method, message)
        else:
            width = self.widths[model][0] + rng.randint(1, 3)  # a width the model refuses
            self.call("malformed", self.stub.ModelInfer, self.request(rng, model, 2, width))

    def worker(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        while not self.stop.is_set():
            self.one(rng)


def model_widths(stub, pb) -> dict[str, tuple[int, int]]:
    widths = {}
    for model in MODELS:
        meta = stub.ModelMetadata(pb.service.ModelMetadataRequest(name=model), timeout=CALL_TIMEOUT_S)
        widths[model] = (int(meta.inputs[0].shape[-1]), int(meta.outputs[0].shape[-1]))
    return widths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-rss-growth-mib", type=float, default=64.0)
    args = parser.parse_args()

    service, service_grpc, _, _ = stubs()

    class Pb:
        pass

    pb = Pb()
    pb.service, pb.service_grpc = service, service_grpc
    repo = Path(tempfile.mkdtemp(prefix="ltserve-soak-"))
    export_models(repo, "demo")
    server = start_server(repo)
    pid = server.process.pid
    try:
        soak = Soak(server.grpc_address, pb, {}, args.seed)
        soak.widths = model_widths(soak.stub, pb)
        threads = [threading.Thread(target=soak.worker, args=(i,), daemon=True)
                   for i in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(min(5.0, args.duration / 10))  # thread pools and allocator arenas warm up
        start_rss, start_threads = proc_status(pid)
        started = time.monotonic()
        samples = [(0.0, start_rss, start_threads)]
        while time.monotonic() - started < args.duration:
            time.sleep(min(SAMPLE_EVERY_S, max(0.0, args.duration - (time.monotonic() - started))))
            if server.process.poll() is not None:
                print(f"FAIL: ltserve exited with {server.process.returncode}\n{server.log()}")
                return 1
            rss, count = proc_status(pid)
            samples.append((time.monotonic() - started, rss, count))
        loaded_rss, loaded_threads = proc_status(pid)
        soak.stop.set()
        for thread in threads:
            thread.join(timeout=CALL_TIMEOUT_S)
        time.sleep(2.0)  # let cancelled and expired requests drain
        end_rss, end_threads = proc_status(pid)
        soak.channel.close()
    finally:
        exit_code = server.terminate()
        shutil.rmtree(repo, ignore_errors=True)

    total = sum(soak.counts.values())
    print(f"soak: {args.duration:.0f} s, {args.clients} clients, {total} calls "
          f"({total / args.duration:.0f}/s), server exit code {exit_code}")
    print(f"{'kind':<10} {'status':<18} {'calls':>9}")
    for (kind, code), count in sorted(soak.counts.items()):
        print(f"{kind:<10} {code:<18} {count:>9}")
    peak_rss = max(s[1] for s in samples)
    print(f"RSS MiB: start {start_rss / 1024:.1f}, end of load {loaded_rss / 1024:.1f}, "
          f"idle after {end_rss / 1024:.1f}, peak sample {peak_rss / 1024:.1f}")
    print(f"threads: start {start_threads}, end of load {loaded_threads}, idle after {end_threads}")
    failures = list(soak.unexpected)
    if exit_code != 0:
        failures.append(f"ltserve exited {exit_code} on SIGTERM")
    if end_threads > start_threads:
        failures.append(f"threads grew from {start_threads} to {end_threads}")
    if (end_rss - start_rss) / 1024 > args.max_rss_growth_mib:
        failures.append(f"RSS grew {(end_rss - start_rss) / 1024:.1f} MiB "
                        f"(limit {args.max_rss_growth_mib} MiB)")
    for failure in failures:
        print(f"FAIL: {failure}")
    print("soak: PASS" if not failures else "soak: FAIL")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
