"""Session fixtures: one real ltserve serving the demo and test model repositories."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from ltserve_testing import export_models, start_server, stubs


@pytest.fixture(scope="session")
def model_repo() -> Path:
    repo = Path(tempfile.mkdtemp(prefix="ltserve-repo-"))
    export_models(repo, "demo")
    export_models(repo, "test")
    yield repo
    shutil.rmtree(repo, ignore_errors=True)


@pytest.fixture(scope="session")
def ltserve_server(model_repo):
    server = start_server(model_repo)
    yield server
    server.terminate()


@pytest.fixture(scope="session")
def pb():
    """The generated protobuf/gRPC modules: pb.service, pb.service_grpc, pb.health, pb.health_grpc."""
    service, service_grpc, health, health_grpc = stubs()

    class Modules:
        pass

    modules = Modules()
    modules.service, modules.service_grpc = service, service_grpc
    modules.health, modules.health_grpc = health, health_grpc
    return modules


@pytest.fixture()
def grpc_stub(ltserve_server, pb):
    import grpc

    channel = grpc.insecure_channel(ltserve_server.grpc_address)
    yield pb.service_grpc.GRPCInferenceServiceStub(channel)
    channel.close()
