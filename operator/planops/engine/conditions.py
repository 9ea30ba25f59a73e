"""The seed-1 `if` language: a real tokenizer and a recursive-descent parser (no eval, no regex
splitting of the expression).

    expr       := and ( "||" and )*
    and        := comparison ( "&&" comparison )*       # && binds tighter than ||
    comparison := operand ( "==" | "!=" | ">" | "<" ) operand
    operand    := reference | input | literal
    reference  := "$" step-id "." field                  # $build.status
    input      := "$input." name                         # a top-level key of the plan's input
    literal    := '...' | "..."                          # an operator inside quotes is literal

`>` and `<` compare text (the seed says so): `'10' < '9'` is true. There are no parentheses and no
escapes, as in the seed. A null output compares as the empty string; an input value as its text
(a string as it is, any other value as JSON: `true`, `3`, `["a"]`), as a template interpolates it.
Operands are values, never expressions: what a reference or an input yields is compared, never
parsed or rendered again. An input the plan does not have fails the step (MissingInput), as an
unsettled reference does. `{{...}}` is no part of the language (the validator refuses it there:
an `if` is not rendered).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from planops.engine.references import Lookup, Reference, resolve
from planops.engine.references import parse as parse_reference
from planops.engine.templates import as_text

Op = Literal["==", "!=", ">", "<"]


class ConditionSyntaxError(ValueError):
    """The expression does not parse; the message says where (1-based column)."""


class MissingInput(ValueError):  # noqa: N818 - reads as a fact, like UnsettledReference
    """An `$input.NAME` operand names a key the plan's input does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(f"$input.{name}: the plan's input has no {name!r}")
        self.name = name


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Input:
    """`$input.NAME`: the plan's input's top-level key NAME."""

    name: str

    def __str__(self) -> str:
        return f"${INPUT}.{self.name}"


Operand = Reference | Input | Text
#: the root of `$input.NAME` (a step may not be named so: the reserved template roots)
INPUT = "input"
_INPUT_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Comparison:
    left: Operand
    op: Op
    right: Operand


@dataclass(frozen=True)
class And:
    terms: tuple[Comparison, ...]


@dataclass(frozen=True)
class Or:
    terms: tuple[And, ...]


@dataclass(frozen=True)
class _Token:
    kind: Literal["ref", "lit", "op", "bool"]
    text: str
    col: int
    ref: Reference | Input | None = None


_OPERATORS = ("==", "!=", "&&", "||", ">", "<")


def tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c.isspace():
            i += 1
        elif c in "'\"":
            end = source.find(c, i + 1)
            if end < 0:
                raise ConditionSyntaxError(f"unterminated {c}-quoted literal at column {i + 1}")
            tokens.append(_Token("lit", source[i + 1 : end], i + 1))
            i = end + 1
        elif c == "$":
            j = i + 1
            while j < n and (source[j].isalnum() or source[j] in "_-."):
                j += 1
            word = source[i:j]
            ref: Reference | Input | None = (
                _input(word, i) if word.startswith(f"${INPUT}.") else parse_reference(word)
            )
            if ref is None:
                raise ConditionSyntaxError(
                    f"malformed reference {word!r} at column {i + 1} (expected $<step>.output "
                    "or $<step>.status)"
                )
            tokens.append(_Token("ref", word, i + 1, ref))
            i = j
        else:
            op = next((o for o in _OPERATORS if source.startswith(o, i)), None)
            if op is None:
                raise ConditionSyntaxError(
                    f"unexpected {c!r} at column {i + 1}: operands are $<step>.<field> references "
                    "or quoted literals"
                )
            tokens.append(_Token("bool" if op in ("&&", "||") else "op", op, i + 1))
            i += len(op)
    return tokens


def _input(word: str, i: int) -> Input:
    name = word[len(INPUT) + 2 :]
    if not _INPUT_NAME.fullmatch(name):
        raise ConditionSyntaxError(
            f"malformed input {word!r} at column {i + 1}: $input.NAME reads one top-level key "
            "of the plan's input (letters, digits, _ and -); a nested value needs a decide step "
            "with a gate on a template"
        )
    return Input(name)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.pos = 0
        self.end_col = len(source) + 1

    def _peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _where(self) -> str:
        tok = self._peek()
        return f"{tok.text!r} at column {tok.col}" if tok else "end of expression"

    def parse(self) -> Or:
        if not self.tokens:
            raise ConditionSyntaxError("empty condition")
        terms = [self._and()]
        while (tok := self._peek()) is not None and tok.text == "||":
            self.pos += 1
            terms.append(self._and())
        if self._peek() is not None:
            raise ConditionSyntaxError(f"expected && or || before {self._where()}")
        return Or(tuple(terms))

    def _and(self) -> And:
        terms = [self._comparison()]
        while (tok := self._peek()) is not None and tok.text == "&&":
            self.pos += 1
            terms.append(self._comparison())
        return And(tuple(terms))

    def _operand(self) -> Operand:
        tok = self._peek()
        if tok is None or tok.kind not in ("ref", "lit"):
            raise ConditionSyntaxError(
                f"expected a reference or a quoted literal, got {self._where()}"
            )
        self.pos += 1
        return tok.ref if tok.ref is not None else Text(tok.text)

    def _comparison(self) -> Comparison:
        left = self._operand()
        tok = self._peek()
        if tok is None or tok.kind != "op":
            raise ConditionSyntaxError(f"expected ==, !=, > or <, got {self._where()}")
        self.pos += 1
        op: Op = tok.text  # type: ignore[assignment]
        return Comparison(left, op, self._operand())


def parse(source: str) -> Or:
    """Parse an `if` expression; raises ConditionSyntaxError."""
    return _Parser(source).parse()


def _operands(expr: Or) -> list[Operand]:
    return [o for conj in expr.terms for cmp in conj.terms for o in (cmp.left, cmp.right)]


def references(expr: Or) -> list[Reference]:
    """The step references (`$id.output`, `$id.status`) among the operands."""
    return [o for o in _operands(expr) if isinstance(o, Reference)]


def inputs(expr: Or) -> list[Input]:
    """The `$input.NAME` operands."""
    return [o for o in _operands(expr) if isinstance(o, Input)]


def _value(operand: Operand, lookup: Lookup, given: Mapping[str, Any]) -> str:
    if isinstance(operand, Text):
        return operand.text
    if isinstance(operand, Input):
        if operand.name not in given:
            raise MissingInput(operand.name)
        return as_text(given[operand.name])
    return resolve(operand, lookup) or ""


def _compare(c: Comparison, lookup: Lookup, given: Mapping[str, Any]) -> bool:
    left, right = _value(c.left, lookup, given), _value(c.right, lookup, given)
    if c.op == "==":
        return left == right
    if c.op == "!=":
        return left != right
    if c.op == ">":
        return left > right
    return left < right


def evaluate(expr: Or, lookup: Lookup, given: Mapping[str, Any] | None = None) -> bool:
    """True or False over the settled steps (`lookup`) and the plan's input (`given`); raises
    UnsettledReference when an operand names an unsettled step, MissingInput when it names an
    input the plan does not have.

    Every operand is resolved (no short-circuit past an unsettled one), so whether a step fails
    for an unsettled reference never depends on the order of the terms.
    """
    given = {} if given is None else given
    values = [[_compare(c, lookup, given) for c in conj.terms] for conj in expr.terms]
    return any(all(conj) for conj in values)
