"""Checks of deploy/'s container images and Kubernetes manifests: the Kubernetes API schemas,
kustomize rendering, the Deployment's shutdown, probes and security, how the objects refer to each
other, hadolint, and the deployment guide. Rules and dashboard: test_deploy_rules.py; the running
server: test_deploy_server.py."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

import deploy_kustomize
import deploy_promql
from deploy_support import (ADAPTER_VALUES, CUSTOM_RESOURCE_KINDS, DOCKERFILES, EXIT_MARGIN_S, K8S,
                            KUBERNETES_VERSIONS, MIN_STARTUP_BUDGET_S, RENDERINGS, ROOT,
                            STANDALONE_MANIFESTS, container_arg, expand_env, pod_spec, rendered,
                            server_container, the, tool)


# --- Kubernetes schemas ---------------------------------------------------------------------

@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_manifests_validate_against_kubernetes_schemas(rendering, version):
    objects = rendered(rendering)
    checked = 0
    for obj in objects:
        if obj["kind"] in CUSTOM_RESOURCE_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 6, f"only {checked} built-in objects rendered from {rendering}"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", STANDALONE_MANIFESTS, ids=lambda p: p.name)
def test_standalone_manifests_validate(path, version):
    for obj in deploy_kustomize.load_documents(path):
        kubernetes_validate.validate(obj, version, strict=True)


def test_validation_rejects_an_invalid_manifest():
    deployment = the(rendered("gpu"), "Deployment")
    server_container([deployment])["readinessProbe"]["grpc"]["port"] = "grpc"  # must be a number
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


def test_custom_resources_against_their_schemas():
    kinds = {o["kind"] for o in rendered("base")} & CUSTOM_RESOURCE_KINDS
    assert kinds == CUSTOM_RESOURCE_KINDS
    for kind in sorted(kinds):
        with pytest.raises(kubernetes_validate.utils.SchemaNotFoundError):
            kubernetes_validate.validate(the(rendered("base"), kind), KUBERNETES_VERSIONS[-1])
    reason = ("the Prometheus Operator's CRD schemas (ServiceMonitor, PrometheusRule) are not "
              "available offline: no Debian or PyPI package ships them; the rules are checked "
              "with promtool and the ServiceMonitor's selector and port by the wiring test")
    print(f"SKIP: {reason}")
    pytest.skip(reason)


# --- kustomize --------------------------------------------------------------------------------

@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_renderer_matches_kubectl_kustomize(rendering):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the overlays are rendered only by deploy_kustomize")
    out = subprocess.run([kubectl, "kustomize", str(RENDERINGS[rendering])],
                         check=True, capture_output=True, text=True).stdout

    def keyed(objects):
        return {(o["kind"], o["metadata"]["name"]): o for o in objects}

    assert keyed(rendered(rendering)) == keyed(d for d in yaml.safe_load_all(out) if d)


def test_renderer_refuses_what_it_does_not_implement(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": [str(K8S / "base")], "commonLabels": {"team": "x"}}))
    with pytest.raises(deploy_kustomize.UnsupportedKustomization, match="commonLabels"):
        deploy_kustomize.render(tmp_path)


def test_overlays_set_image_namespace_and_hardware():
    gpu, cpu = rendered("gpu"), rendered("cpu")
    for objects, flavour in ((gpu, "gpu"), (cpu, "cpu")):
        assert {o["metadata"].get("namespace") for o in objects} == {"ltserve"}
        image = server_container(objects)["image"]
        assert "/" in image and image.endswith(f"-{flavour}"), image
    gpu_resources = server_container(gpu)["resources"]
    assert gpu_resources["limits"]["nvidia.com/gpu"] == gpu_resources["requests"]["nvidia.com/gpu"] == "1"
    assert any(t["key"] == "nvidia.com/gpu" for t in pod_spec(gpu)["tolerations"])
    assert "nvidia.com/gpu" not in json.dumps(server_container(cpu)["resources"])
    # The patch merged into the base container rather than replacing it.
    for objects in (gpu, cpu):
        assert server_container(objects)["readinessProbe"] == server_container(rendered("base"))["readinessProbe"]


# --- Deployment semantics -------------------------------------------------------------------

@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_shutdown_fits_in_the_grace_period(rendering):
    objects = rendered(rendering)
    container = server_container(objects)
    exit_timeout = float(expand_env(container_arg(container, "--exit-timeout"), container, objects))
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    drain_s = float(pre_stop[1])
    # Endpoint removal propagates within a few seconds; anything shorter would drop requests.
    assert drain_s >= 5
    grace = pod_spec(objects)["terminationGracePeriodSeconds"]
    assert grace >= drain_s + exit_timeout + EXIT_MARGIN_S, (grace, drain_s, exit_timeout)
    strategy = the(objects, "Deployment")["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_probes_use_grpc_health_on_the_grpc_port(rendering):
    container = server_container(rendered(rendering))
    grpc_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    assert int(container_arg(container, "--grpc-port")) == grpc_port
    services = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = container[probe]
        assert spec["grpc"]["port"] == grpc_port
        services[probe] = spec["grpc"]["service"]
    # The two names ltserve registers with grpc.health.v1 (server/app/main.cc).
    assert set(services.values()) <= {"", "inference.GRPCInferenceService"}
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= MIN_STARTUP_BUDGET_S
    liveness, readiness = container["livenessProbe"], container["readinessProbe"]
    assert (liveness["periodSeconds"] * liveness["failureThreshold"]
            > readiness["periodSeconds"] * readiness["failureThreshold"])


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_pod_runs_unprivileged_as_the_image_user(rendering):
    objects = rendered(rendering)
    pod, container = pod_spec(objects), server_container(objects)
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and "add" not in security["capabilities"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for dockerfile in DOCKERFILES:
        user = re.search(r"^USER (\d+):(\d+)$", dockerfile.read_text(), re.M)
        assert user, f"{dockerfile.name}: USER must be numeric uid:gid"
        assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == \
            (int(user.group(1)), int(user.group(2)))
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    assert container_arg(container, "--model-repository") == "/models"


def test_objects_are_wired_together():
    objects = rendered("gpu")
    deployment = the(objects, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    container = server_container(objects)
    port_names = {p["name"] for p in container["ports"]}
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for service in services.values():
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    assert services["ltserve"]["spec"]["type"] == "ClusterIP"
    assert services["ltserve-headless"]["spec"]["clusterIP"] == "None"
    assert services["ltserve-headless"]["spec"]["publishNotReadyAddresses"] is False
    # ServiceMonitor: exactly the metrics service, which keeps not-ready pods in the scrape.
    monitor = the(objects, "ServiceMonitor")
    selected = [s for s in services.values()
                if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in selected] == ["ltserve-metrics"]
    assert selected[0]["spec"]["publishNotReadyAddresses"] is True
    metrics_port = next(p for p in selected[0]["spec"]["ports"]
                        if p["name"] == monitor["spec"]["endpoints"][0]["port"])
    http_port = next(p["containerPort"] for p in container["ports"] if p["name"] == metrics_port["targetPort"])
    assert int(container_arg(container, "--http-port")) == http_port
    for kind in ("PodDisruptionBudget",):
        assert the(objects, kind)["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    target = the(objects, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    the(objects, "PersistentVolumeClaim", volumes["models"]["persistentVolumeClaim"]["claimName"])
    for env in container["env"]:
        the(objects, "ConfigMap", env["valueFrom"]["configMapKeyRef"]["name"])


def test_hpa_metrics_are_served_by_the_adapter():
    adapter_rules = yaml.safe_load(ADAPTER_VALUES.read_text())["rules"]["custom"]
    served = {rule["name"]["as"] for rule in adapter_rules}
    hpa = the(rendered("base"), "HorizontalPodAutoscaler")
    wanted = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    assert wanted and wanted <= served, wanted - served
    for rule in adapter_rules:
        overrides = rule["resources"]["overrides"]
        assert {overrides["namespace"]["resource"], overrides["pod"]["resource"]} == {"namespace", "pod"}
        assert re.fullmatch(rule["name"]["matches"], next(iter(deploy_promql.metric_names(rule["seriesQuery"]))))


# --- Dockerfiles ------------------------------------------------------------------------------


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile):
    result = subprocess.run([tool("hadolint"), "--no-color", str(dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get install curl\n")
    assert subprocess.run([tool("hadolint"), str(bad)], capture_output=True).returncode != 0


def copied_paths(text: str) -> set[str]:
    paths = set()
    for line in text.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            paths.update(p.rstrip("/") for p in line.split()[1:-1])
    return paths


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_builds_with_the_project_scripts(dockerfile):
    text = dockerfile.read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2, "builder and runtime stages"
    # Both stages on debian:12-slim by name: the base that container-test.sh can make itself.
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["debian:12-slim", "debian:12-slim"]
    # pip's CA bundle reaches the builder as a build secret, never as a file in a layer.
    setup = re.search(r"^RUN --mount=type=secret,id=pip-ca scripts/setup.sh --release$", text, re.M)
    assert setup
    assert "pip-ca" not in text.split("AS runtime", 1)[1]
    # The project's build script, through a compiler cache mounted across builds (shared by both
    # images), so that a change under server/ recompiles only what it touched.
    build = re.search(r"^RUN --mount=type=cache,target=(\S+),id=ltserve-ccache \\\n\s+CCACHE_DIR=\1 "
                      r"scripts/release-build.sh /opt/ltserve ", text, re.M)
    assert build
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" in text
    # Docker fetches the frontend that a syntax directive names from a registry.
    assert not re.search(r"^#\s*syntax\s*=", text, re.M | re.I)
    copied = copied_paths(text)
    # Everything the top-level CMakeLists adds when tests and benchmarks are off.
    cmake = (ROOT / "CMakeLists.txt").read_text()
    unconditional = re.sub(r"if\(LTSERVE_BUILD_(TESTS|BENCH)\)(.|\n)*?endif\(\)", "", cmake)
    needed = set(re.findall(r"add_subdirectory\((\w+)\)", unconditional)) | {"CMakeLists.txt"}
    needed |= {f"scripts/{s}" for s in ("setup.sh", "requirements-release.txt", "requirements-cuda.txt",
                                        "release-build.sh", "cuda-stubs.c")}
    assert needed <= copied, needed - copied
    for path in copied:
        assert (ROOT / path).exists(), path
    # The build context admits exactly what is copied (an allowlist after "*").
    ignore = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert ignore[0] == "*" and copied <= {line[1:] for line in ignore[1:] if line.startswith("!")}, ignore


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_runtime_matches_the_deployment(dockerfile):
    runtime = dockerfile.read_text().split("AS runtime", 1)[1]
    container = server_container(rendered("base"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    exposed = set(map(int, re.search(r"^EXPOSE (.+)$", runtime, re.M).group(1).split()))
    assert exposed == set(ports.values())
    health = re.search(r'^HEALTHCHECK (.|\n)*?"http://127\.0\.0\.1:(\d+)(/[^"]*)"', runtime, re.M)
    assert health and int(health.group(2)) == ports["http"] and health.group(3) == "/v2/health/ready"
    assert re.search(r"apt-get install[^\n]*\bcurl\b", runtime), "HEALTHCHECK's tool must be installed"
    cmd = json.loads(re.search(r"^CMD (.+)$", runtime, re.M).group(1))
    assert cmd[cmd.index("--grpc-port") + 1] == str(ports["grpc"])
    assert cmd[cmd.index("--http-port") + 1] == str(ports["http"])
    volume = json.loads(re.search(r"^VOLUME (.+)$", runtime, re.M).group(1))
    assert volume == [cmd[cmd.index("--model-repository") + 1]]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_labels_follow_oci(dockerfile):
    runtime = dockerfile.read_text().split("AS runtime", 1)[1]
    label = re.search(r"^LABEL ((?:.*\\\n)*.*)$", runtime, re.M)
    assert label, "the runtime stage has no LABEL"
    keys = set(re.findall(r"([\w.-]+)=", label.group(1)))
    assert keys and all(k.startswith("org.opencontainers.image.") for k in keys), keys
    assert {f"org.opencontainers.image.{k}" for k in ("title", "version", "revision", "created")} <= keys


def built_image_names() -> dict[str, str]:
    """The image names scripts/container-test.sh builds, by flavour."""
    script = (ROOT / "scripts" / "container-test.sh").read_text()
    name = re.search(r"^IMAGE_NAME=\$\{IMAGE_NAME:-(\S+)\}$", script, re.M).group(1)
    version = re.search(r"project\(ltserve VERSION (\S+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    return {flavour: f"{name}:{version}-{flavour}" for flavour in ("cpu", "gpu")}


def test_overlays_run_the_images_that_container_test_builds():
    for flavour, image in built_image_names().items():
        assert server_container(rendered(flavour))["image"] == image, flavour


def test_probes_ask_what_container_test_checks_in_the_images():
    """Every gRPC health service a probe asks for is one that container-test.sh finds SERVING in
    both images, on a port the images expose."""
    import ast
    tree = ast.parse((ROOT / "scripts" / "container-check.py").read_text())
    checked = next(ast.literal_eval(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   and any(getattr(t, "id", None) == "PROBED_SERVICES" for t in node.targets))
    for flavour in ("cpu", "gpu"):
        container = server_container(rendered(flavour))
        grpc_port = {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == grpc_port, (flavour, probe)
            assert container[probe]["grpc"].get("service", "") in checked, (flavour, probe)


def test_deployment_guide_names_only_existing_files():
    guide = (ROOT / "docs" / "deployment.md").read_text()
    paths = set(re.findall(r"\b((?:deploy|scripts|models|docs)/[\w./-]*\w)", guide))
    assert len(paths) >= 10
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing
    assert f"kubectl apply -k {RENDERINGS['gpu'].relative_to(ROOT)}" in guide
