"""`-o jsonpath=TEMPLATE`: kubectl's JSONPath templates, so a line that works with `kubectl get
plans -o jsonpath=...` works with `kubectl plan get -o jsonpath=...` and prints the same bytes.

kubectl's dialect is a template, not a bare JSONPath: text outside braces is printed as it is,
each `{...}` holds one expression relative to the current object (`{.metadata.name}`, `$` being
the object), a string literal (`{"\\t"}`, `{"\\n"}`), or `{range EXPR}...{end}`, which repeats
its body for each result. A key with dots is written with `\\.`
(`{.metadata.labels.app\\.kubernetes\\.io/name}`). A result that is a string, number, boolean
or null is printed as text (`null` for null), a map or list as compact JSON, several results of
one expression separated by a space, and a key that is missing prints nothing (kubectl get's
`--allow-missing-template-keys=true`).

The expressions themselves (`[*]`, `[0]`, `[1:3]`, `[-1]`, `..name`, filters like
`[?(@.status.phase=="Failed")]`) are evaluated by jsonpath-ng (its `ext` parser, for the
filters), a maintained library; only the template around them is kubectl's and lives here,
because no Python library parses kubectl's templates (jsonpath-ng, python-jsonpath and
jsonpath-rfc9535 take one bare expression each, with `$` required and no `\\.` escapes). Not
supported: unions of several names in one bracket (`['a', 'b']`); a template that uses one is
refused with the reason. A test compares the output with the real kubectl's on the same object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
from jsonpath_ng.ext.parser import parse


class TemplateError(ValueError):
    """A template that cannot be read: the message says where and why."""


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Expr:
    source: str
    path: Any  # a jsonpath-ng expression


@dataclass(frozen=True)
class _Range:
    expr: _Expr
    body: tuple[_Text | _Expr | _Range, ...]


Node = _Text | _Expr | _Range


def compile_template(template: str) -> tuple[Node, ...]:
    """The template's parts; TemplateError for an unclosed brace, a `{range}` without its
    `{end}` (or an `{end}` without one), or an expression jsonpath cannot read."""
    stack: list[tuple[_Expr | None, list[Node]]] = [(None, [])]
    for kind, piece in _actions(template):
        body = stack[-1][1]
        if kind == "text":
            body.append(_Text(piece))
        elif piece.startswith(("'", '"')):
            body.append(_Text(_literal(piece)))
        elif piece == "end":
            if len(stack) == 1:
                raise TemplateError("{end} without a {range ...} before it")
            expr, inner = stack.pop()
            assert expr is not None
            stack[-1][1].append(_Range(expr, tuple(inner)))
        elif piece.startswith("range ") or piece == "range":
            stack.append((_expression(piece[len("range") :].strip()), []))
        else:
            body.append(_expression(piece))
    if len(stack) > 1:
        raise TemplateError(
            f"{{range {stack[-1][0].source if stack[-1][0] else ''}}} not closed by {{end}}"
        )
    return tuple(stack[0][1])


def render(template: str | tuple[Node, ...], obj: Any) -> str:
    """The template applied to `obj`, as kubectl prints it."""
    nodes = compile_template(template) if isinstance(template, str) else template
    return "".join(_render(nodes, obj))


def _render(nodes: tuple[Node, ...], current: Any) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Expr):
            out.append(" ".join(_text(v) for v in _find(node, current)))
        else:
            for item in _find(node.expr, current):
                out += _render(node.body, item)
    return out


def _find(expr: _Expr, current: Any) -> list[Any]:
    return [m.value for m in expr.path.find(current)]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return json.dumps(value)  # numbers, true/false, null as kubectl prints them


def _actions(template: str) -> list[tuple[str, str]]:
    """("text", TEXT) and ("action", INSIDE) in order; braces inside a quoted string of an
    action (a filter's "}" or a literal "{") do not end it."""
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(template):
        start = template.find("{", i)
        if start < 0:
            found.append(("text", template[i:]))
            break
        if start > i:
            found.append(("text", template[i:start]))
        end, quote = start + 1, ""
        while end < len(template) and (quote or template[end] != "}"):
            c = template[end]
            if quote and c == "\\":
                end += 1
            elif c in "\"'" and (not quote or c == quote):
                quote = "" if quote else c
            end += 1
        if end >= len(template):
            raise TemplateError(f"unclosed action at character {start + 1}: {template[start:]!r}")
        found.append(("action", template[start + 1 : end].strip()))
        i = end + 1
    return found


#: the escapes a kubectl string literal may hold (Go's: \n, \t, \x41, \u00e9, ...)
_ESCAPE = re.compile(
    r'\\(?:[abfnrtv\\\'"]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3})'
)


def _literal(piece: str) -> str:
    """A string literal, in double or single quotes, with Go's escapes."""
    body = piece[1:-1]
    if len(piece) < 2 or piece[-1] != piece[0] or "\\" in _ESCAPE.sub("", body):
        raise TemplateError(f'{{{piece}}}: not a string literal (write it as "\\n", "\\t", "text")')
    return _ESCAPE.sub(lambda m: m.group().encode().decode("unicode_escape"), body)


def _expression(source: str) -> _Expr:
    """kubectl's expression (`.a.b`, `$.a`, `@`, `.labels.app\\.io/name`, `.items[?(@.x==1)]`)
    as a jsonpath-ng path relative to the current object."""
    if not source:
        raise TemplateError("an empty expression: {.metadata.name} is one")
    try:
        return _Expr(source, parse(_translate(source)))
    except (JsonPathLexerError, JsonPathParserError, Exception) as e:
        if isinstance(e, TemplateError):
            raise
        raise TemplateError(f"{{{source}}}: {e}") from None


def _translate(source: str) -> str:
    """`$` plus each step of `source`: names quoted (so `\\.`, `/` and `-` stay in a name),
    brackets as written, `..` as recursive descent, `*` as every child."""
    s = source[1:] if source[0] in "$@" else source
    out, i = ["$"], 0
    while i < len(s):
        if s.startswith("..", i):
            out.append("..")
            i += 2
        elif s[i] == ".":
            i += 1
        elif s[i] == "[":
            end = _bracket_end(s, i)
            inner = s[i + 1 : end]
            if "," in inner and not inner.lstrip().startswith("?"):
                raise TemplateError(
                    f"{{{source}}}: unions of several keys ([{inner}]) are not supported; "
                    "write one expression for each"
                )
            out.append(s[i : end + 1])
            i = end + 1
        else:
            name, i = _name(s, i)
            step = "*" if name == "*" else json.dumps(name)
            out.append(step if out[-1].endswith("..") else "." + step)
    return "".join(out)


def _name(s: str, i: int) -> tuple[str, int]:
    chars: list[str] = []
    while i < len(s) and s[i] not in ".[":
        if s[i] == "\\" and i + 1 < len(s):
            i += 1
        chars.append(s[i])
        i += 1
    return "".join(chars), i


def _bracket_end(s: str, start: int) -> int:
    depth, quote, i = 0, "", start
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise TemplateError(f"unclosed [ in {s!r}")
