"""Seed 2 templates: `{{input.x}}`, `{{<id>.output}}`, `{{<id>.status}}`, `{{<id>.json.a.0}}`,
`{{<id>.stderr}}` (planops': the tail of what a step wrote on stderr, never part of its output),
and a control step's result fields directly: `{{scan.results}}`, `{{pick.items}}`,
`{{confirm.answer.ok}}` (the validator allows that form on control steps only).

- A string that is exactly one template is a *typed splice*: it becomes the value itself (a number
  stays a number, an object an object). Anywhere else in a string, the value is interpolated as
  text (strings as they are, other values as JSON).
- Rendered at dispatch time, in one pass with seed 1's references (`render(..., refs=)`): a
  value that a reference or a template yields is never scanned for templates again. A step
  result may only be used by a step that depends on it, directly or transitively (the validator
  refuses the rest, code `template`), so at dispatch the value is always there.
- In a shell step a template is substituted *per word*, after the command line is split, and
  never in the first word (the allowlist check stays static): a value can never add words,
  whatever it contains. Nor options: a word that begins with a template may not render to text
  starting with `-` unless options have ended: an earlier literal word `--` that no option
  precedes (`render_command`).

Reserved roots (seed 2): input, item, index, accumulator, length; step ids may not shadow them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planops.engine import references
from planops.engine.references import strings
from planops.engine.report import ArtifactRecord

RESERVED = ("input", "item", "index", "accumulator", "length")
STEP_FIELDS = ("output", "status", "json", "stderr")
#: a job step's files (engine.step_files): `{{id.results.NAME}}`, `{{id.artifacts.NAME}}`; on
#: a control step, `results` is its own result field (`{{each.results}}` of a map)
FILE_FIELDS = ("results", "artifacts")
#: Each `.part` starts with a dot that no part contains: one way to match, linear time.
PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")
#: One character class: a search for it cannot backtrack.
_BRACE = re.compile(r"[{}]")


class TemplateError(ValueError):
    """A template that cannot be rendered (or parsed); the message says which and why."""


@dataclass(frozen=True)
class Template:
    text: str  # as written, for messages
    root: str
    path: tuple[str, ...]

    @property
    def step_field(self) -> str | None:
        return self.path[0] if self.root not in RESERVED and self.path else None


def scan(text: str) -> Iterator[tuple[int, int, str]]:
    """Every template in `text`, left to right, as (start, end, expression stripped).

    The language is that of the regex `\\{\\{\\s*([^{}]*?)\\s*\\}\\}` (a template is `{{`, text
    without braces, `}}`; the expression is that text without surrounding whitespace), but the
    regex backtracks: `{{` followed by n spaces and no `}}` cost it O(n^3) (a 3 kB field took
    minutes of the validator). This scan reads each character a bounded number of times: from a
    `{{`, the first brace after it either starts `}}` (a template) or does not (no template starts
    there; the next `{{` is looked for one character on, as the regex's search would).
    """
    pos = 0
    while (start := text.find("{{", pos)) >= 0:
        brace = _BRACE.search(text, start + 2)
        close = brace.start() if brace is not None else len(text)
        if text.startswith("}}", close):
            yield start, close + 2, text[start + 2 : close].strip()
            pos = close + 2
        else:
            pos = start + 1


def _whole(text: str) -> str | None:
    """The expression when `text` is exactly one template (a typed splice), else None."""
    if not text.startswith("{{"):
        return None
    first = next(scan(text), None)
    return first[2] if first is not None and first[0] == 0 and first[1] == len(text) else None


def is_splice(text: str) -> bool:
    """Whether `text` is exactly one template: a typed splice, which renders to the value itself
    (any JSON type), not to text."""
    return _whole(text) is not None


def parse(expr: str, text: str) -> Template:
    if not PATH.match(expr):
        raise TemplateError(f"{text}: expected a dotted path such as input.name or build.output")
    root, *path = expr.split(".")
    return Template(text, root, tuple(path))


def find(value: Any) -> Iterator[tuple[str, Template | TemplateError]]:
    """Every template in a JSON value (any depth) as (field path suffix, template or error)."""
    for where, text in strings(value, ""):
        if "{{" not in text:
            continue
        found = 0
        for start, end, expr in scan(text):
            found += 1
            try:
                yield where, parse(expr, text[start:end])
            except TemplateError as e:
                yield where, e
        if text.count("{{") != found:
            yield where, TemplateError(f"{text!r}: an unclosed or nested '{{{{'")


#: Looks up a root: `input` -> the plan's input; a step id -> {"output", "status"} (a
#: StepResult, from the decider) or None.
Lookup = Callable[[str], Any]

#: The most text one rendering (a step's input or command line, a gate, the plan's output) may
#: substitute. Values are copied into the result each time a template names them, so a step
#: output of 1 MiB named 20,000 times would be 20 GB in the operator: the step fails instead.
#: More than a Job's object can carry anyway (etcd's limit is 1.5 MiB).
MAX_RENDERED = 2 * 1024 * 1024

_UNPARSED = object()


class StepResult(dict[str, Any]):
    """A settled step as templates see it, `{"status", "output", "stderr"}`, its output parsed
    as JSON at most once: a decider hands out one per step, so `{{a.json.x}}` named 10,000
    times (or per item of a filter) parses a's output once, not 10,000 times. Parsed values are
    shared: the engine never mutates them."""

    def __init__(
        self,
        status: str,
        output: str | None,
        stderr: str | None = None,
        results: Mapping[str, str] | None = None,
        artifacts: Sequence[ArtifactRecord] | None = None,
    ) -> None:
        super().__init__(status=status, output=output, stderr=stderr)
        if results is not None:  # a job step declaring results: {{id.results.NAME}}
            self["results"] = dict(results)
        if artifacts is not None:  # {{id.artifacts.NAME}}: the record an input fetches
            self["artifacts"] = {a.name: a.to_json() for a in artifacts}
        self._parsed: Any = _UNPARSED

    def parsed(self) -> Any:
        """The output as JSON; raises ValueError (references.loads; not cached)."""
        if self._parsed is _UNPARSED:
            self._parsed = references.loads(self["output"] or "")
        return self._parsed


class _Size:
    """What one rendering substituted so far, against MAX_RENDERED."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total = 0

    def add(self, value: Any, text: str) -> Any:
        if isinstance(value, str):
            self.total += len(value)
        elif isinstance(value, dict | list):
            # JSON text is what the value becomes; measured only while under the bound
            self.total += len(json.dumps(value)) if self.total <= MAX_RENDERED else 1
        else:
            self.total += 8
        if self.total > MAX_RENDERED:
            raise TemplateError(
                f"{text}: rendering substitutes more than {MAX_RENDERED} characters (a value "
                "named too often, or too big): pass big values through the workspace instead"
            )
        return value


def _resolve(t: Template, lookup: Lookup) -> Any:
    base = lookup(t.root)
    path = list(t.path)
    if t.root not in RESERVED:  # a step: output | status | json[.path]
        if base is None:
            raise TemplateError(f"{t.text}: step {t.root!r} has not settled")
        field = path.pop(0) if path else ""
        if field in FILE_FIELDS and field in base:  # a job step's results, artifacts
            base = base[field]
            if not path:
                raise TemplateError(f"{t.text}: name one, {t.text[:-2]}.NAME}}}}")
        else:
            if field not in STEP_FIELDS:  # a control step's result field: {{scan.results}}
                path.insert(0, field)
                field = "json"
            base = _step_field(t, base, field)
    for part in path:
        if isinstance(base, dict) and part in base:
            base = base[part]
        elif isinstance(base, list) and part.isdigit() and _index(part) < len(base):
            base = base[_index(part)]
        else:
            raise TemplateError(f"{t.text}: no {part!r} in the value")
    return base


def _step_field(t: Template, base: Any, field: str) -> Any:
    if field != "json":
        return base[field]
    try:
        return (
            base.parsed()
            if isinstance(base, StepResult)
            else references.loads(base["output"] or "")
        )
    except ValueError as e:
        raise TemplateError(_not_json(t, e)) from None


def _not_json(t: Template, e: ValueError) -> str:
    """Why `{{id.json...}}` cannot be read: `.json` reads JSON, and only JSON (text is never
    taken for a value silently: docs/plan-language.md)."""
    if not isinstance(e, json.JSONDecodeError):
        return f"{t.text}: the output of step {t.root!r} is not JSON ({e})"
    if not e.doc.strip():
        return f"{t.text}: step {t.root!r} printed nothing on stdout, and nothing is not JSON"
    return (
        f"{t.text}: the output of step {t.root!r} is not JSON ({e.msg}, at character {e.pos}); "
        f"`.json` reads JSON only: its text is {{{{{t.root}.output}}}}"
    )


def _index(part: str) -> int:
    """A list index written in a template path: int() refuses more than 4300 digits (a
    ValueError that would escape the decider), and no list is that long anyway."""
    digits = part.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else 1 << 62


def render(value: Any, lookup: Lookup, refs: references.Lookup | None = None) -> Any:
    """`value` with every template rendered (a new value); raises TemplateError (also when it
    would substitute more than MAX_RENDERED characters).

    With `refs`, a string that is a whole seed-1 reference (`$id.output`) is resolved in the same
    walk (UnsettledReference when its step has not settled): a step's input is rendered in **one
    pass**. Each string of the definition is either a reference or a template string, and what a
    reference or a template yields is never scanned again. (Resolving references first and
    rendering templates over the result let a step's output, or the plan's input, carry
    `{{other.output}}` into a step that does not depend on `other`: the validator only sees the
    definition.)
    """
    return _render(value, lookup, refs, _Size())


def _render(value: Any, lookup: Lookup, refs: references.Lookup | None, size: _Size) -> Any:
    if isinstance(value, str):
        if refs is not None and value.startswith("$"):
            ref = references.parse(value)
            if ref is not None:
                return size.add(references.resolve(ref, refs), value)
        if "{{" not in value:
            return value
        whole = _whole(value)
        if whole is not None:
            return size.add(_resolve(parse(whole, value), lookup), value)
        return _interpolate(value, lookup, size)
    if isinstance(value, dict):
        return {k: _render(v, lookup, refs, size) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, lookup, refs, size) for v in value]
    return value


def _interpolate(text: str, lookup: Lookup, size: _Size) -> str:
    """Each template of `text` replaced by its value as text; the values are never scanned."""
    out: list[str] = []
    pos = 0
    for start, end, expr in scan(text):
        template = text[start:end]
        out += (
            text[pos:start],
            size.add(as_text(_resolve(parse(expr, template), lookup)), template),
        )
        pos = end
    out.append(text[pos:])
    return "".join(out)


def as_text(value: Any) -> str:
    """A value as a template interpolates it into text (and an `if` compares it): a string as
    it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


class OptionLikeWordError(TemplateError):
    """A shell word that begins with a template renders to text starting with `-`."""


#: how much of a refused value an error shows
_SHOWN = 60


def is_option(word: str) -> bool:
    """A word a getopt-style program may read as an option: `-` and one more character at least
    (`-` alone names standard input, an operand)."""
    return len(word) > 1 and word.startswith("-")


def render_command(words: list[str], lookup: Lookup, step: str) -> list[str]:
    """A shell step's words after splitting, each word after the binary rendered to text on its
    own: never re-split, so a value cannot add words.

    Nor options: a word that *begins* with a template and renders to text starting with `-` is
    refused (OptionLikeWordError, a failed attempt like any template that cannot render), unless
    options have ended before it. `date {{input.when}}` with `--file=/etc/passwd` would print
    that file. A word that begins with text the author wrote (`--name={{input.x}}`,
    `-{{input.flags}}`) is the author's option.

    Options end at a literal word `--` only when no word before it is an option: after an
    option, the `--` may be that option's argument (`grep -e -- {{input.x}}` searches for `--`
    and reads the next word as an option again), and which options take an argument is each
    program's own business. Operands before it are fine (`grep x -- {{input.f}}`): getopt
    takes an option's argument from the option's own word or the word right after it, so a `--`
    that follows no option is never an argument. The rule is sound only for such programs; a
    program whose operands are options in disguise (`dd if=FILE`, `find`'s expressions) is the
    Capsule owner's to allow or not.
    """
    out = [words[0]]
    operands = False  # options have ended: what follows is read as operands
    options = False  # an earlier word is an option: a `--` now may be its argument
    size = _Size()  # one bound for the whole line
    for n, word in enumerate(words[1:], 1):
        first = next(scan(word), None) if "{{" in word else None
        if first is None:  # literal (an unclosed `{{` is refused by the validator)
            out.append(word)
            operands = operands or (word == "--" and not options)
            options = options or is_option(word)
            continue
        text = as_text(_render(word, lookup, None, size))
        if first[0] == 0 and text.startswith("-") and not operands:
            shown = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
            raise OptionLikeWordError(
                f"step {step!r}: argument {n} of the command line, {word!r}, renders to "
                f"{shown!r}, which starts with '-': the program would read it as an option. Put "
                "`--` before it in the command line, before any option, if the program should "
                "read it as an operand"
            )
        options = options or is_option(text)
        out.append(text)
    return out
