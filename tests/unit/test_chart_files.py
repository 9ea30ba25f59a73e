"""The chart's files read as text (no helm needed): every operator RBAC rule says why, every value
is documented and typed, alerts and the dashboard use only metrics planops exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from planops import metrics

CHART = Path(__file__).resolve().parents[2] / "charts" / "planops"


def test_every_operator_rule_is_explained_by_a_comment():
    text = (CHART / "templates" / "_helpers.tpl").read_text()
    text += (CHART / "templates" / "rbac-operator.yaml").read_text()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("- apiGroups:"):
            assert lines[i - 1].lstrip().startswith("#"), f"rule without a why: {line!r} ({i})"


def test_every_value_is_documented_and_in_the_schema():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    text = (CHART / "values.yaml").read_text().splitlines()

    def leaves(d: dict[str, Any], prefix: str = "") -> list[str]:
        out = []
        for k, v in d.items():
            if isinstance(v, dict) and v and k not in ("resources",):
                out += leaves(v, f"{prefix}{k}.")
            else:
                out.append(f"{prefix}{k}")
        return out

    for leaf in leaves(values):
        node = schema
        for part in leaf.split("."):
            assert part in node.get("properties", {}), f"{leaf} is not in values.schema.json"
            node = node["properties"][part]
        key = leaf.split(".")[-1]
        idx = next(i for i, line in enumerate(text) if re.match(rf"^\s*{key}:", line))
        above = text[idx - 1].strip()
        assert above.startswith("#"), f"{leaf} has no comment above it in values.yaml"


def exported() -> set[str]:
    """The series names the operator exports: each family's, and those it makes."""
    names = set()
    for m in metrics.REGISTRY.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        names |= {m.name} | {m.name + s for s in suffixes.get(m.type, [])}
    return names


def test_alerts_and_dashboards_only_use_exported_metrics():
    files = [*CHART.glob("alerts*.yaml"), *(CHART / "dashboards").glob("*.json")]
    assert len(files) >= 4
    for path in files:
        used = set(re.findall(r"planops_[a-z_]+", path.read_text()))
        assert used and used <= exported(), (path.name, used - exported())


def _exprs(node: Any) -> list[str]:
    """Every PromQL of a dashboard: its panels' targets' and its variables' queries."""
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        if node.get("type") == "query" and isinstance(node.get("definition"), str):
            found.append(node["definition"])
        return found + [e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


#: a metric and its selector, in PromQL
SELECTED = re.compile(r"(planops_[a-z_]+)(\{[^}]*\})?")


def test_the_namespace_dashboard_selects_every_metric_by_its_namespace_variable():
    board = json.loads((CHART / "dashboards" / "planops-namespace.json").read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["namespace"]["type"] == "query"
    assert "label_values(planops_plans_total, namespace)" in variables["namespace"]["definition"]
    exprs = [e for p in board["panels"] for e in _exprs(p)]
    assert len(exprs) >= 8 and len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for expr in exprs:
        for name, selector in SELECTED.findall(expr):
            assert name in exported(), (name, expr)
            assert 'namespace=~"$namespace"' in selector, expr
            tenanted = {m.metric._name for m in metrics.TENANTED}
            assert any(name.startswith(t) for t in tenanted), f"{name} has no namespace label"


def test_the_team_alerts_each_filter_on_their_namespace():
    rule = yaml.safe_load((CHART / "alerts-team.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    namespace = rule["metadata"]["namespace"]
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert {a["alert"] for a in alerts} >= {
        "PlanopsTeamRunsFailing",
        "PlanopsTeamStepsStuck",
        "PlanopsTeamQueueWaiting",
    }
    for a in alerts:
        found = SELECTED.findall(a["expr"])
        assert found, a["alert"]
        for name, selector in found:
            assert name in exported(), (a["alert"], name)
            assert f'namespace="{namespace}"' in selector, (a["alert"], a["expr"])
