"""Shared helpers for the Python test suite: gRPC stubs generated from proto/ and a real
ltserve process on free loopback ports."""
from __future__ import annotations

import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("LTSERVE_BUILD_DIR", ROOT / "build"))
SERVER_BINARY = BUILD_DIR / "server" / "app" / "ltserve"

# A server loads and warms up every model before it reports ready; on a loaded 2-core CI
# machine libtorch's first load alone can take seconds.
SERVER_READY_TIMEOUT_S = 180.0

_stubs_dir: Path | None = None


def stubs():
    """Returns (grpc_service_pb2, grpc_service_pb2_grpc, health_pb2, health_pb2_grpc), generated
    from the repository's own .proto files once per test session."""
    global _stubs_dir
    if _stubs_dir is None:
        from grpc_tools import protoc

        _stubs_dir = Path(tempfile.mkdtemp(prefix="ltserve-stubs-"))
        for proto in ("model_config.proto", "grpc_service.proto", "health.proto"):
            rc = protoc.main([
                "protoc", f"-I{ROOT / 'proto'}", f"--python_out={_stubs_dir}",
                f"--grpc_python_out={_stubs_dir}", str(ROOT / "proto" / proto)])
            assert rc == 0, f"protoc failed on {proto}"
        sys.path.insert(0, str(_stubs_dir))
    return tuple(importlib.import_module(m) for m in (
        "grpc_service_pb2", "grpc_service_pb2_grpc", "health_pb2", "health_pb2_grpc"))


def export_models(repo: Path, model_set: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "models" / "export_models.py"), "--repo", str(repo),
                    "--set", model_set], check=True)


@dataclass
class ServerProcess:
    process: subprocess.Popen
    repo: Path
    log_path: Path
    grpc_address: str = ""
    http_port: int = -1
    binary_dir: Path = BUILD_DIR
    _log_lines: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self) -> str:
        with self._lock:
            return "".join(self._log_lines)

    def wait_for_log(self, pattern: str, timeout_s: float) -> re.Match:
        deadline = time.monotonic() + timeout_s
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            with self._lock:
                for line in self._log_lines:
                    match = regex.search(line)
                    if match:
                        return match
            if self.process.poll() is not None:
                raise RuntimeError(f"ltserve exited with {self.process.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise TimeoutError(f"no log line matching {pattern!r} within {timeout_s} s:\n{self.log()}")

    def terminate(self, sig=signal.SIGTERM, timeout_s: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def start_server(repo: Path, *extra_args: str, wait_ready: bool = True) -> ServerProcess:
    if not SERVER_BINARY.exists():
        raise FileNotFoundError(f"{SERVER_BINARY} not built (run scripts/build.sh)")
    log_path = Path(tempfile.mkstemp(prefix="ltserve-", suffix=".log")[1])
    process = subprocess.Popen(
        [str(SERVER_BINARY), "--model-repository", str(repo), "--host", "127.0.0.1",
         "--grpc-port", "0", "--http-port", "0", *extra_args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    server = ServerProcess(process=process, repo=repo, log_path=log_path)

    def pump():
        with open(log_path, "w") as sink:
            for line in process.stdout:
                sink.write(line)
                sink.flush()
                with server._lock:
                    server._log_lines.append(line)

    threading.Thread(target=pump, daemon=True).start()
    match = server.wait_for_log(r"listening: grpc=([\d.]+:\d+) http=(\d+|off)", 60)
    server.grpc_address = match.group(1)
    server.http_port = int(match.group(2)) if match.group(2) != "off" else -1
    if wait_ready:
        server.wait_for_log(r"ltserve ready=", SERVER_READY_TIMEOUT_S)
    return server


def copy_model(src_repo: Path, name: str, dst_repo: Path) -> None:
    shutil.copytree(src_repo / name, dst_repo / name)
