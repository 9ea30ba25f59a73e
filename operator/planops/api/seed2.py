"""The importer of seed-2 plan files (`{identifier, steps: [{id, tool_name, input}]}`).

Seed 2 writes every step as a tool call: `tool_name` names a catalog tool, a sub-plan
(`plan__<identifier>`) or a control step (`map`, `decide`, ...) whose grammar is the `input`; its
steps "run sequentially". planops spells the same plan as a DAG (docs/plan-language.md), so the
importer:

- chains the steps with `dependsOn` (each step depends on the one before);
- `tool_name: <control>` -> the control key (`map: {...}`), bodies converted the same way (a
  single call `{tool_name, input}` becomes `{tool: ..., input}`; lists keep their ids);
- `tool_name: plan__x` -> a capsule step (`capsule: x`, the input as its task);
- any other `tool_name` -> a tool step of the Capsule's inventory;
- `input_schema`, `output` keep their meaning; the catalog fields (`name`, `description`,
  `exemplars`, `requires_servers`, a step's `reasoning`) have no Kubernetes meaning and are
  dropped; `solver` needs a language model and is refused, pointing at `output`.

The result is a bare plan (`{"id", "steps", ...}`) that `planops.api.documents` then parses like
any other; problems found here come back as `Problem`s with the seed file's field paths.
"""

from __future__ import annotations

from typing import Any

CONTROL = ("exit", "decide", "filter", "map", "reduce", "ask", "agent", "infer")
CATALOG_FIELDS = ("name", "description", "exemplars", "requires_servers", "requiresServers")
_RENAME = {"output_schema": "outputSchema", "when_unanswered": "whenUnanswered"}


def is_seed2(doc: dict[str, Any]) -> bool:
    return "kind" not in doc and "identifier" in doc and isinstance(doc.get("steps"), list)


def convert(doc: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(bare plan, problems as (path, message))."""
    problems: list[tuple[str, str]] = []
    plan: dict[str, Any] = {"id": doc["identifier"]}
    for key, value in doc.items():
        if key in ("identifier", "steps", *CATALOG_FIELDS):
            continue
        if key == "solver":
            problems.append(
                (
                    "solver",
                    "a solver needs a language model, which planops does not run: declare the "
                    "plan's `output` template map instead (or delegate to a capsule step)",
                )
            )
            continue
        plan[key] = value
    steps = []
    previous: str | None = None
    for n, raw in enumerate(doc["steps"]):
        step = _step(raw, f"steps[{n}]", problems, with_id=True)
        if step is None:
            continue
        if previous is not None:  # seed 2: steps run sequentially
            step["dependsOn"] = [previous, *step.get("dependsOn", [])]
        previous = step.get("id")
        steps.append(step)
    plan["steps"] = steps
    return plan, problems


def _step(
    raw: Any, path: str, problems: list[tuple[str, str]], with_id: bool
) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        problems.append((path, "expected a step {id, tool_name, input}"))
        return None
    if "tool_name" not in raw and "toolName" not in raw:
        return raw  # already in planops' spelling
    tool = raw.get("tool_name", raw.get("toolName"))
    value = raw.get("input")
    out: dict[str, Any] = {}
    if with_id or "id" in raw:
        out["id"] = raw.get("id")
    extra = {k: v for k, v in raw.items() if k not in ("id", "tool_name", "toolName", "input")}
    extra.pop("reasoning", None)
    out.update(extra)
    if not isinstance(tool, str) or not tool:
        problems.append((f"{path}.tool_name", "required: a tool, plan__<name> or a control step"))
        return None
    if tool in CONTROL:
        out[tool] = _control(tool, value, f"{path}.input", problems)
    elif tool.startswith("plan__"):
        out["capsule"] = tool.removeprefix("plan__").replace("_", "-").lower()
        out["input"] = value if value is not None else ""
    else:
        out["tool"] = tool
        if value is not None:
            out["input"] = value
    return out


def _control(kind: str, value: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    if not isinstance(value, dict):
        return value  # the validator says what is wrong with it
    out = {_RENAME.get(k, k): v for k, v in value.items()}
    for key in ("then", "else", "do"):
        body = out.get(key)
        if isinstance(body, dict):
            out[key] = _step(body, f"{path}.{key}", problems, with_id=False)
        elif isinstance(body, list):
            out[key] = [
                _step(b, f"{path}.{key}[{n}]", problems, with_id=True) for n, b in enumerate(body)
            ]
    return out
