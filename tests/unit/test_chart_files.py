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


def test_alerts_and_dashboard_only_use_exported_metrics():
    exported = set()
    for m in metrics.REGISTRY.collect():  # a family's name, and the series names it makes
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        exported |= {m.name} | {m.name + s for s in suffixes.get(m.type, [])}
    text = (CHART / "alerts.yaml").read_text() + (CHART / "dashboards" / "planops.json").read_text()
    used = set(re.findall(r"planops_[a-z_]+", text))
    assert used and used <= exported, used - exported
