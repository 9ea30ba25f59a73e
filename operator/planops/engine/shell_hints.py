"""Warnings for shell steps written as if a shell ran them: `shell: "echo hi | wc -l"` prints
`hi | wc -l`, since a shell step's line is split into words and run as one program (never given
to a shell: the Capsule's allowlist names programs, and a shell would run anything).

A warning, not a refusal: the same characters can be meant as arguments (`grep -e '|'` is
quoted and not warned about, but `expr 2 '<' 3` written unquoted is legal too), and a plan that
runs today must not be refused tomorrow. The CLI prints the warnings (`validate`, `run
--local`); pipelines and redirections belong in a tool of the Capsule.
"""

from __future__ import annotations

import shlex
from typing import Any

from planops.api.models import PlanSpec, Step
from planops.engine import bodies
from planops.engine.errors import PlanError

#: characters a POSIX shell reads as operators when unquoted
_OPERATOR_CHARS = frozenset("();<>|&")
CODE = "not-a-shell"


def _operators(line: str) -> list[str]:
    """The shell operators written unquoted in `line` (`|`, `>`, `&&`, `;`, `$(` ...)."""
    if not _OPERATOR_CHARS.intersection(line):
        return []  # most lines: no lexing (shlex is slow, and a plan may have 100,000 steps)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []  # unbalanced quotes: the validator's shell-syntax refusal says so
    found: list[str] = []
    for n, token in enumerate(tokens):
        if token == "$" and n + 1 < len(tokens) and tokens[n + 1].startswith("("):
            found.append("$(")
        elif token and set(token) <= _OPERATOR_CHARS and not (found and found[-1] == "$("):
            found.append(token)
    return list(dict.fromkeys(found))


def _warning(step_id: str, path: str, line: str) -> PlanError | None:
    ops = _operators(line)
    if not ops:
        return None
    shown = ", ".join(f"`{op}`" for op in ops)
    what = "an argument" if len(ops) == 1 else "arguments"
    return PlanError(
        CODE,
        step_id,
        path,
        f"{shown} would be passed to the program as {what}: "
        "a shell step is split into words and run without a shell (no pipes, redirections, "
        "`&&`, `;` or `$(...)`); put a pipeline in a tool of the Capsule, or quote the "
        "characters if they are meant as arguments",
    )


def _body_steps(step: Step, kind: str) -> list[tuple[str, Step]]:
    value: Any = getattr(step, kind)
    found = []
    for key, raw in bodies.bodies(kind, value).items():
        try:
            parsed = bodies.parse(raw)
        except bodies.BodyError:
            continue  # the validator refuses it
        found += [(f".{kind}.{key}", s) for s in parsed]
    return found


def shell_warnings(spec: PlanSpec) -> list[PlanError]:
    """One warning per shell step (body steps included) that writes shell operators unquoted."""
    warnings = []
    for i, step in enumerate(spec.steps):
        candidates = [("", step)]
        for kind in bodies.BODY_KINDS:
            if isinstance(getattr(step, kind), dict):
                candidates += _body_steps(step, kind)
        for where, s in candidates:
            if s.shell is not None:
                inner = "" if not where else f"{where}[{s.id}]"
                found = _warning(step.id, f"steps[{i}]{inner}.shell", s.shell)
                if found is not None:
                    warnings.append(found)
    return warnings
