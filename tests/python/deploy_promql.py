"""Reads metric and label names out of PromQL and out of a Prometheus text exposition.

Good enough for the expressions in deploy/ (no PromQL parser exists on PyPI for Python): string
literals and Grafana/adapter template variables are removed first, then identifiers are classified
by where they stand. promtool separately checks that every expression parses.
"""

from __future__ import annotations

import re

IDENT = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHERS = re.compile(r"\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_SAMPLE = re.compile(rf"^({IDENT})(?:\{{(.*)\}})?\s+\S+")
_SAMPLE_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
_TYPE = re.compile(rf"^# TYPE ({IDENT}) (\w+)")

# Labels Prometheus attaches to every scraped series (ServiceMonitor target labels), and the
# synthetic series it records per target: neither comes from ltserve's exposition.
TARGET_LABELS = {"namespace", "pod", "service", "endpoint", "container", "job", "instance"}
SYNTHETIC_METRICS = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def strip_literals(expr: str) -> str:
    expr = re.sub(r"<<\.[A-Za-z]+>>", "", expr)  # prometheus-adapter templates
    return _STRING.sub('""', expr)


def metric_names(expr: str) -> set[str]:
    """Identifiers that name series: ltserve's metrics, recorded series and synthetic ones."""
    text = strip_literals(expr)
    text = _MATCHERS.sub("{}", text)
    text = _GROUPING.sub("()", text)
    names = set()
    for token in re.findall(IDENT, text):
        if token.startswith("ltserve_") or ":ltserve_" in token or token in SYNTHETIC_METRICS:
            names.add(token)
    return names


def label_names(expr: str) -> set[str]:
    """Labels the expression matches on or groups by."""
    text = strip_literals(expr)
    labels = set()
    for group in _GROUPING.findall(text):
        labels.update(label.strip() for label in group.split(",") if label.strip())
    for matchers in _MATCHERS.findall(text):
        labels.update(_MATCHER_LABEL.findall(matchers))
    return labels


def parse_exposition(text: str) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Maps every sample name to the union of its label names, and every family to its type."""
    samples: dict[str, set[str]] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if match := _TYPE.match(line):
            types[match.group(1)] = match.group(2)
        elif line and not line.startswith("#") and (match := _SAMPLE.match(line)):
            labels = set(_SAMPLE_LABEL.findall(match.group(2) or ""))
            samples.setdefault(match.group(1), set()).update(labels)
    return samples, types
