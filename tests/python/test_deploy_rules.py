"""Checks of deploy/'s Prometheus side: recording and alerting rules with promtool (syntax, and
behaviour on generated series), every PromQL expression of the dashboard and prometheus-adapter,
the dashboard's views, and the metric names against the documented contract."""
from __future__ import annotations

import json
import re

import numpy as np
import yaml

import deploy_promql
from deploy_support import (DASHBOARD, all_queries, contract_metrics, dashboard_queries, promtool,
                            queried_metrics, rule_groups)


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
