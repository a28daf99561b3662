"""Checks of deploy/: container images, Kubernetes manifests, Prometheus rules, prometheus-adapter
rules and the Grafana dashboard, against the Kubernetes API schemas, hadolint, promtool and a real
scrape of the running server (so a renamed metric breaks CI, not production)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import numpy as np
import pytest
import yaml

import deploy_kustomize
import deploy_promql

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILES = sorted((DEPLOY / "docker").glob("Dockerfile.*"))
RENDERINGS = {"base": K8S / "base", "gpu": K8S / "overlays" / "gpu", "cpu": K8S / "overlays" / "cpu"}
STANDALONE_MANIFESTS = [K8S / "tools" / "model-upload-pod.yaml"]
ADAPTER_VALUES = K8S / "prometheus-adapter" / "values.yaml"
DASHBOARD = DEPLOY / "grafana" / "ltserve-dashboard.json"

# 1.28: the oldest release still in mainstream support at the big managed services when this was
# written (native gRPC probes are GA since 1.27); the newest is whatever the validator knows.
KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.utils.latest_version())
CUSTOM_RESOURCE_KINDS = {"ServiceMonitor", "PrometheusRule"}
# Model loading, plan building and CUDA graph capture of a large model: the startup probe must
# allow at least this long before liveness can restart the pod.
MIN_STARTUP_BUDGET_S = 300
# What the server needs after SIGTERM beyond --exit-timeout: flushing the last responses (gRPC
# shutdown deadline 2 s) and process exit.
EXIT_MARGIN_S = 5


def rendered(name: str) -> list[dict]:
    return deploy_kustomize.render(RENDERINGS[name])


def the(objects: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_spec(objects: list[dict]) -> dict:
    return the(objects, "Deployment")["spec"]["template"]["spec"]


def server_container(objects: list[dict]) -> dict:
    matches = [c for c in pod_spec(objects)["containers"] if c["name"] == "ltserve"]
    assert len(matches) == 1
    return matches[0]


def container_arg(container: dict, flag: str) -> str:
    args = container["args"]
    assert flag in args, f"{flag} not in {args}"
    return args[args.index(flag) + 1]


def expand_env(value: str, container: dict, objects: list[dict]) -> str:
    """Resolves $(VAR) in an argument the way the kubelet does, from ConfigMap-backed env."""
    def lookup(match):
        env = next(e for e in container["env"] if e["name"] == match.group(1))
        ref = env["valueFrom"]["configMapKeyRef"]
        return the(objects, "ConfigMap", ref["name"])["data"][ref["key"]]
    return re.sub(r"\$\(([A-Z0-9_]+)\)", lookup, value)


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

def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} not found: scripts/setup.sh installs it"
    return found


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
    assert re.search(r"^RUN scripts/setup.sh$", text, re.M)
    assert re.search(r"^RUN scripts/release-build.sh /opt/ltserve", text, re.M)
    copied = copied_paths(text)
    # Everything the top-level CMakeLists adds when tests and benchmarks are off.
    cmake = (ROOT / "CMakeLists.txt").read_text()
    unconditional = re.sub(r"if\(LTSERVE_BUILD_(TESTS|BENCH)\)(.|\n)*?endif\(\)", "", cmake)
    needed = set(re.findall(r"add_subdirectory\((\w+)\)", unconditional)) | {"CMakeLists.txt"}
    needed |= {f"scripts/{s}" for s in ("setup.sh", "requirements.txt", "release-build.sh")}
    assert needed <= copied, needed - copied
    for path in copied:
        assert (ROOT / path).exists(), path


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


# --- Prometheus rules -------------------------------------------------------------------------

def rule_groups() -> list[dict]:
    return the(rendered("base"), "PrometheusRule")["spec"]["groups"]


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, cwd=cwd)


def test_rules_pass_promtool_check(tmp_path):
    path = tmp_path / "ltserve-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups()}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = [("alert" if "alert" in r else "record") for g in rule_groups() for r in g["rules"]]
    assert kinds.count("record") >= 4 and kinds.count("alert") >= 3


def test_promtool_rejects_a_broken_rule(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "x:ltserve_request_success:rate5m", "expr": "sum(rate(ltserve_request_success_total[5m])"}]}]}))
    assert promtool("check", "rules", str(path)).returncode != 0


def grafana_to_promql(expr: str) -> str:
    return expr.replace("$__rate_interval", "1m").replace("$namespace", ".*").replace("$model", ".*")


def adapter_to_promql(rule: dict, query: str) -> str:
    series = next(iter(deploy_promql.metric_names(rule["seriesQuery"])))
    return (query.replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", 'namespace="ltserve",pod=~"ltserve-.*"')
            .replace("<<.GroupBy>>", "pod"))


def dashboard_queries() -> dict[str, str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = {f"dashboard {p['title']} {t['refId']}": t["expr"]
               for p in dashboard["panels"] for t in p["targets"]}
    return queries


def all_queries() -> dict[str, str]:
    """Every PromQL expression deploy/ runs, by where it stands, as Prometheus would receive it."""
    queries = {k: grafana_to_promql(v) for k, v in dashboard_queries().items()}
    for group in rule_groups():
        for rule in group["rules"]:
            queries[f"rule {rule.get('alert') or rule.get('record')}"] = rule["expr"]
    for i, rule in enumerate(yaml.safe_load(ADAPTER_VALUES.read_text())["rules"]["custom"]):
        queries[f"adapter {i} seriesQuery"] = rule["seriesQuery"]
        queries[f"adapter {i} metricsQuery"] = adapter_to_promql(rule, rule["metricsQuery"])
    return queries


def test_every_query_parses(tmp_path):
    rules = [{"record": f"check:query_{i}", "expr": expr} for i, expr in enumerate(all_queries().values())]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": rules}]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_shows_the_required_views():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = " ".join(dashboard_queries().values())
    compact = re.sub(r"\s+", "", exprs)
    for quantile in ("0.5", "0.99"):
        assert f"histogram_quantile({quantile},sumby(model,le)(rate(ltserve_request_duration_seconds_bucket" in compact
    for stage in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert f"ltserve_{stage}_duration_seconds_sum" in exprs
    assert re.search(r"rate\(ltserve_inference_count_total[^/]*/\s*sum by \(model\) \(rate\(ltserve_execution_count_total", exprs)
    assert "sumby(model,reason)(rate(ltserve_request_failure_total" in compact
    for gpu in ("ltserve_gpu_memory_used_bytes", "ltserve_gpu_memory_total_bytes", "ltserve_gpu_utilization_ratio"):
        assert gpu in exprs
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "namespace", "model"} <= variables
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


# --- alerts and recording rules on generated series --------------------------------------------

QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
SERIES_MINUTES = 30
EVAL_TIME = "25m"  # past every rule's 5m rate window plus its longest `for:` (10m)
# Recorded values are ratios of rates over exactly linear counters: they match the Python
# computation up to float rounding.
VALUE_TOLERANCE = 1e-9


def histogram_quantile(q: float, bounds, cumulative) -> float:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding the rank."""
    rank = q * cumulative[-1]
    for i, count in enumerate(cumulative):
        if count >= rank:
            if i == len(bounds):  # the +Inf bucket: Prometheus answers the largest finite bound
                return bounds[-1]
            lower, below = (bounds[i - 1], cumulative[i - 1]) if i else (0.0, 0.0)
            return lower + (bounds[i] - lower) * (rank - below) / (count - below)
    raise AssertionError("unreachable")


def threshold(alert: str) -> float:
    rule = next(r for g in rule_groups() for r in g["rules"] if r.get("alert") == alert)
    return float(re.search(r">\s*([0-9.e-]+)\s*$", rule["expr"]).group(1))


def counter(name: str, labels: dict, per_minute: int) -> dict:
    selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{selector}}}", "values": f"0+{per_minute}x{SERIES_MINUTES}"}


def test_alerts_and_recordings_on_generated_series(tmp_path):
    rng = np.random.default_rng()
    base = {"namespace": "ltserve", "pod": "ltserve-0", "version": "1"}
    series, expected_alerts, value_checks = [], {}, []

    # Error ratio: one model well above the threshold, one well below, and one whose failures
    # are all the clients' own (invalid input, cancelled), which must not count.
    limit = threshold("LtserveHighErrorRate")
    ratios = {"failing": rng.uniform(5 * limit, 30 * limit), "healthy": rng.uniform(0, limit / 5)}
    for model, ratio in ratios.items():
        success = int(rng.integers(500, 5000))
        failures = int(round(success * ratio / (1 - ratio)))
        labels = {**base, "model": model}
        series.append(counter("ltserve_request_success_total", labels, success))
        series.append(counter("ltserve_request_failure_total", {**labels, "reason": "queue_full"}, failures))
        value_checks.append(("namespace_model_version:ltserve_request_errors:ratio_rate5m", model,
                             failures / (success + failures)))
        if failures / (success + failures) > limit:
            expected_alerts.setdefault("LtserveHighErrorRate", []).append({"severity": "critical", "model": model})
    labels = {**base, "model": "client_errors"}
    success = int(rng.integers(100, 1000))
    series.append(counter("ltserve_request_success_total", labels, success))
    for reason in ("invalid_input", "cancelled"):
        series.append(counter("ltserve_request_failure_total", {**labels, "reason": reason}, success))

    # Queue time: a model with a few percent of requests waiting past the threshold, and one
    # that never waits longer than 50 ms.
    limit = threshold("LtserveQueueTimeHigh")
    for model, slow_share in (("slow", rng.uniform(0.03, 0.2)), ("fast", 0.0)):
        fast_counts = rng.integers(50, 500, size=4)  # buckets up to 0.05 s
        slow_total = int(round(fast_counts.sum() * slow_share / (1 - slow_share)))
        slow_counts = rng.multinomial(slow_total, [0.1, 0.6, 0.3]) if slow_total else np.zeros(3, int)
        per_bucket = np.concatenate([fast_counts, slow_counts, [0]])  # up to 1 s, then +Inf
        cumulative = np.cumsum(per_bucket).tolist()
        for bound, count in zip([*map(str, QUEUE_BUCKETS), "+Inf"], cumulative):
            series.append(counter("ltserve_queue_duration_seconds_bucket", {**base, "model": model, "le": bound}, count))
        p99 = histogram_quantile(0.99, QUEUE_BUCKETS, cumulative)
        value_checks.append(("namespace_model_version:ltserve_queue_duration_seconds:p99_rate5m", model, p99))
        if p99 > limit:
            expected_alerts.setdefault("LtserveQueueTimeHigh", []).append({"severity": "warning", "model": model})
    assert "LtserveQueueTimeHigh" in expected_alerts, "the generated slow model must cross the threshold"

    for model, ready in (("broken", 0), ("fine", 1)):
        series.append({"series": f'ltserve_model_ready{{namespace="ltserve",pod="ltserve-0",model="{model}",version="1"}}',
                       "values": f"{ready}x{SERIES_MINUTES}"})
    expected_alerts["LtserveModelNotReady"] = [{"severity": "warning", "pod": "ltserve-0", "model": "broken"}]
    for pod, up in (("ltserve-0", 1), ("ltserve-1", 0)):
        series.append({"series": f'up{{job="ltserve-metrics",namespace="ltserve",pod="{pod}"}}',
                       "values": f"{up}x{SERIES_MINUTES}"})
    expected_alerts["LtserveTargetDown"] = [{"severity": "warning", "job": "ltserve-metrics", "pod": "ltserve-1"}]

    def full_labels(alert, extra):
        labels = {"namespace": "ltserve", **extra}
        if alert not in ("LtserveTargetDown",):
            labels["version"] = "1"
        return labels

    groups = rule_groups()
    for group in groups:  # promtool compares annotations too; their wording is not under test
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "30s",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": EVAL_TIME, "alertname": alert,
                 "exp_alerts": [{"exp_labels": full_labels(alert, labels)} for labels in expected_alerts.get(alert, [])]}
                for alert in ("LtserveHighErrorRate", "LtserveQueueTimeHigh", "LtserveModelNotReady", "LtserveTargetDown")
            ],
            "promql_expr_test": [
                {"expr": f'abs({record}{{model="{model}"}} - {value!r}) < bool {VALUE_TOLERANCE}',
                 "eval_time": EVAL_TIME,
                 "exp_samples": [{"labels": f'{{namespace="ltserve",model="{model}",version="1"}}', "value": 1}]}
                for record, model, value in value_checks
            ],
        }],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    result = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# --- every queried metric exists in a real scrape ---------------------------------------------

SCRAPE_TIMEOUT_S = 10
INFER_TIMEOUT_S = 60
NUMPY_TYPES = {"FP32": "float32", "FP16": "float16", "FP64": "float64", "INT64": "int64", "INT32": "int32"}


def send_traffic(server, pb) -> int:
    """One good and one malformed request per model, so that the per-model counters, histograms
    and the failure counter have samples. Returns how many good requests succeeded."""
    import grpc

    rng = np.random.default_rng()
    served = 0
    with grpc.insecure_channel(server.grpc_address) as channel:
        stub = pb.service_grpc.GRPCInferenceServiceStub(channel)
        for model in sorted(p.name for p in server.repo.iterdir() if (p / "config.pbtxt").exists()):
            try:
                metadata = stub.ModelMetadata(pb.service.ModelMetadataRequest(name=model), timeout=INFER_TIMEOUT_S)
            except grpc.RpcError:
                continue  # the test repository holds deliberately broken models
            if any(t.datatype not in NUMPY_TYPES for t in metadata.inputs):
                continue
            request = pb.service.ModelInferRequest(model_name=model)
            for tensor in metadata.inputs:
                shape = [d if d > 0 else int(rng.integers(1, 4)) for d in tensor.shape]
                request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=shape)
                values = rng.standard_normal(shape).astype(NUMPY_TYPES[tensor.datatype])
                request.raw_input_contents.append(values.tobytes())
            try:
                stub.ModelInfer(request, timeout=INFER_TIMEOUT_S)
                served += 1
            except grpc.RpcError:
                pass  # e.g. a random batch above the model's maximum: the next model still counts
            del request.inputs[0]
            request.inputs.add(name="NO_SUCH_INPUT", datatype="FP32", shape=[1])
            with pytest.raises(grpc.RpcError):
                stub.ModelInfer(request, timeout=INFER_TIMEOUT_S)
    return served


def scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT_S) as response:
        assert response.status == 200
        return response.read().decode()


def contract_metrics() -> set[str]:
    """Metric names in docs/architecture.md's table (the contract with deploy/)."""
    table = (ROOT / "docs" / "architecture.md").read_text()
    return set(re.findall(r"`(ltserve_[a-z0-9_]+)`", table))


def queried_metrics() -> dict[str, set[str]]:
    used = {where: deploy_promql.metric_names(expr) for where, expr in all_queries().items()}
    for variable in json.loads(DASHBOARD.read_text())["templating"]["list"]:
        if variable["type"] == "query":
            used[f"dashboard variable {variable['name']}"] = deploy_promql.metric_names(variable["definition"])
    return used


def test_every_queried_metric_exists_in_a_real_scrape(ltserve_server, pb):
    assert send_traffic(ltserve_server, pb) >= 1, "no model answered an inference"
    samples, types = deploy_promql.parse_exposition(scrape(ltserve_server.http_port))
    exposed = set(samples) | set(types)
    recorded = {r["record"] for g in rule_groups() for r in g["rules"] if "record" in r}
    has_gpu = any(name.startswith("ltserve_gpu_") for name in samples)
    problems, checked = [], set()
    for where, names in queried_metrics().items():
        for name in names:
            if ":" in name:
                ok = name in recorded
            elif name in deploy_promql.SYNTHETIC_METRICS:
                ok = True
            elif name.startswith("ltserve_gpu_") and not has_gpu:
                # NVML metrics exist only with a GPU: hold them to the documented contract here.
                ok = name in contract_metrics()
                print(f"{name}: no GPU on this machine, checked against docs/architecture.md")
            else:
                ok = name in exposed
            checked.add(name)
            if not ok:
                problems.append(f"{where}: {name} is not exposed by ltserve")
        raw = [n for n in names if n in samples]
        if raw and where in all_queries():
            have = set().union(*(samples[n] for n in raw)) | deploy_promql.TARGET_LABELS
            missing = deploy_promql.label_names(all_queries()[where]) - have
            if missing:
                problems.append(f"{where}: labels {sorted(missing)} not on {sorted(raw)}")
    print(f"checked {len(checked)} metric names against the scrape")
    assert not problems, "\n".join(problems)


def test_deployment_guide_names_only_existing_files():
    guide = (ROOT / "docs" / "deployment.md").read_text()
    paths = set(re.findall(r"\b((?:deploy|scripts|models|docs)/[\w./-]*\w)", guide))
    assert len(paths) >= 10
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing
    assert f"kubectl apply -k {RENDERINGS['gpu'].relative_to(ROOT)}" in guide


def test_every_queried_metric_is_in_the_documented_contract():
    """The offline half of the scrape check: names against docs/architecture.md's table."""
    recorded = {r["record"] for g in rule_groups() for r in g["rules"] if "record" in r}
    contract = contract_metrics()
    unknown = set()
    for names in queried_metrics().values():
        for name in names:
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            if not (name in recorded or name in deploy_promql.SYNTHETIC_METRICS or family in contract):
                unknown.add(name)
    assert not unknown, sorted(unknown)


def test_promql_reader_separates_metrics_from_labels_and_strings():
    expr = ('sum by (model, le) (rate(ltserve_queue_duration_seconds_bucket{reason!~"ltserve_x", '
            'pod=~"<<.LabelMatchers>>"}[5m])) / on (model) group_left sum(up{job="ltserve-metrics"}) '
            '+ ns:ltserve_request_errors:ratio_rate5m')
    assert deploy_promql.metric_names(expr) == {
        "ltserve_queue_duration_seconds_bucket", "up", "ns:ltserve_request_errors:ratio_rate5m"}
    assert deploy_promql.label_names(expr) == {"model", "le", "reason", "pod", "job"}
    samples, types = deploy_promql.parse_exposition(
        '# TYPE ltserve_batch_size histogram\nltserve_batch_size_bucket{model="a",le="+Inf"} 3\n'
        'ltserve_build_info{version="0.1.0",cuda="13.0"} 1\n')
    assert samples == {"ltserve_batch_size_bucket": {"model", "le"}, "ltserve_build_info": {"version", "cuda"}}
    assert types == {"ltserve_batch_size": "histogram"}


# --- the release prefix the images ship ---------------------------------------------------------

RELEASE_SERVER_TIMEOUT_S = 180  # libtorch's first load on a busy 2-core CI machine takes seconds


def wait_for_line(log: Path, pattern: str, process, timeout_s: float) -> re.Match:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if match := re.search(pattern, log.read_text()):
            return match
        assert process.poll() is None, f"exited with {process.returncode}:\n{log.read_text()}"
        time.sleep(0.1)
    raise TimeoutError(f"no {pattern!r} within {timeout_s} s:\n{log.read_text()}")


def test_release_prefix_is_self_contained_and_serves(tmp_path, model_repo):
    """scripts/release-build.sh's install half on the binary CI already built (its build half is
    the ordinary CMake build, replaced here by a no-op `cmake` so CI compiles once); then the
    installed binary alone, as the image runs it, serves and drains."""
    import os
    import signal
    import urllib.error
    import urllib.request

    from ltserve_testing import SERVER_BINARY

    build = tmp_path / "build"
    (build / "server" / "app").mkdir(parents=True)
    shutil.copy2(SERVER_BINARY, build / "server" / "app" / "ltserve")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cmake").write_text("#!/bin/sh\nexit 0\n")
    (fake / "cmake").chmod(0o755)
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "BUILD_DIR": str(build),
           "PYTHON": sys.executable}
    result = subprocess.run([str(ROOT / "scripts" / "release-build.sh"), str(prefix)],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

    binary = prefix / "bin" / "ltserve"
    assert "$ORIGIN/../lib" in subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True).stdout
    libraries = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    venv = str(Path(sys.executable).resolve().parents[1])
    assert "not found" not in libraries and venv not in libraries and str(ROOT) not in libraries, libraries
    assert re.search(r"libtorch_cpu\.so => " + re.escape(str(prefix / "lib")), libraries.replace("bin/../", ""))
    packages = (prefix / "share" / "ltserve" / "runtime-packages.txt").read_text().split()
    assert any(p.startswith("libgrpc++") for p in packages) and all("=" in p for p in packages)

    log = tmp_path / "server.log"
    with log.open("w") as sink:
        process = subprocess.Popen([str(binary), "--model-repository", str(model_repo), "--host", "127.0.0.1",
                                    "--grpc-port", "0", "--http-port", "0"],
                                   stdout=sink, stderr=subprocess.STDOUT, env={"PATH": "/usr/bin:/bin"})
    try:
        port = int(wait_for_line(log, r"listening: grpc=\S+ http=(\d+)", process, RELEASE_SERVER_TIMEOUT_S).group(1))
        ready = wait_for_line(log, r"ltserve ready=(\w+)", process, RELEASE_SERVER_TIMEOUT_S).group(1)
        # The image's HEALTHCHECK request (the test repository's broken models may keep it 503).
        try:
            status = urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=10).status
        except urllib.error.HTTPError as error:
            status = error.code
        assert status == (200 if ready == "true" else 503)
        assert "ltserve_build_info" in scrape(port)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=RELEASE_SERVER_TIMEOUT_S) == 0, log.read_text()
