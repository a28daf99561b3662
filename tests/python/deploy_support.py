"""Shared by the deployment checks (test_deploy*.py): where deploy/ keeps things, the rendered
manifests, the tools, and every PromQL expression deploy/ runs."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import kubernetes_validate
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


def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} not found: scripts/setup.sh installs it"
    return found


def rule_groups() -> list[dict]:
    return the(rendered("base"), "PrometheusRule")["spec"]["groups"]


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, cwd=cwd)


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


SCRAPE_TIMEOUT_S = 10


def scrape(port: int) -> str:
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
