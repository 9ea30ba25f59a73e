"""Warnings for shell steps written as if a shell ran them: `shell: "echo hi | wc -l"` prints
`hi | wc -l`, since a shell step's line is split into words and run as one program (never given
to a shell: the Capsule's allowlist names programs, and a shell would run anything). Likewise a
multi-line block (`shell: |` with `echo one` and `echo two`) is ONE command, its newlines read
as spaces: `echo one echo two` prints `one echo two`.

A warning, not a refusal: the same characters can be meant as arguments (`grep -e '|'` is
quoted and not warned about, but `expr 2 '<' 3` written unquoted is legal too; a newline
inside quotes is part of an argument and not warned about), and a plan that runs today must not
be refused tomorrow. The CLI prints the warnings (`validate`, `run --local`), and the admission
webhook returns them to `kubectl apply`; pipelines, redirections and several lines belong in a
script step (`script:`, run by an interpreter the Capsule allows in `scripts.allow`).
"""

from __future__ import annotations

import shlex
from typing import Any

from planops.api.models import PlanSpec, Step
from planops.engine import bodies
from planops.engine.allowlists import shell_words
from planops.engine.errors import PlanError

#: characters a POSIX shell reads as operators when unquoted
_OPERATOR_CHARS = frozenset("();<>|&")
CODE = "not-a-shell"
#: a shell block of several lines, run as one command
LINES_CODE = "shell-lines"
#: how much of the one command a lines warning shows
_SHOWN = 60


def _lines(line: str) -> tuple[int, int]:
    """(the lines of `line` that hold words, split at newlines outside quotes; the backslashes
    that end a line outside quotes, which a shell reads as a line continuation)."""
    text = line.strip()
    if "\n" not in text:
        return 1, 0
    if not any(c in text for c in "'\"\\"):  # no quotes: every newline ends a line
        return sum(1 for p in text.split("\n") if p.strip()), 0
    quote, escaped, start, i = "", 0, 0, 0
    pieces: list[str] = []
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch == "\\":
            escaped += text.startswith("\n", i + 1)
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "\n":
            pieces.append(text[start:i])
            start = i + 1
        i += 1
    pieces.append(text[start:])
    return sum(1 for p in pieces if p.strip()), escaped


def _lines_warning(step_id: str, path: str, line: str) -> PlanError | None:
    lines, escaped = _lines(line)
    if lines < 2 and not escaped:
        return None
    try:
        one = " ".join(shell_words(line)).replace("\n", "\\n")
    except ValueError:
        return None  # unbalanced quotes: the validator's shell-syntax refusal says so
    shown = one if len(one) <= _SHOWN else one[: _SHOWN - 3] + "..."
    how = (
        f"its {lines} lines run as ONE command, the newlines read as spaces"
        if lines > 1
        else "a `\\` at the end of a line continues nothing: the next line's first word starts "
        "with a newline"
    )
    return PlanError(
        LINES_CODE,
        step_id,
        path,
        f"{how} (`{shown}`): a shell step runs one program, without a shell. Write a script "
        "step (script: the lines, run by an interpreter of the Capsule's scripts.allow), or "
        "one step per command (chained with dependsOn)",
    )


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
        "`&&`, `;` or `$(...)`); write a pipeline as a script step (script:, run by an "
        "interpreter of the Capsule's scripts.allow), or quote the characters if they are meant "
        "as arguments",
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
    """The warnings of every shell step (body and finally steps included): shell operators
    written unquoted (`not-a-shell`), several lines run as one command (`shell-lines`)."""
    warnings = []
    listed = [("steps", spec.steps), ("finally", spec.finally_)]
    for field, steps in listed:
        for i, step in enumerate(steps):
            candidates = [("", step)]
            for kind in bodies.BODY_KINDS:
                if isinstance(getattr(step, kind), dict):
                    candidates += _body_steps(step, kind)
            for where, s in candidates:
                if s.shell is not None:
                    inner = "" if not where else f"{where}[{s.id}]"
                    path = f"{field}[{i}]{inner}.shell"
                    found = (
                        _warning(step.id, path, s.shell),
                        _lines_warning(step.id, path, s.shell),
                    )
                    warnings += [w for w in found if w is not None]
    return warnings
