"""The seed-1 `if` language: a real tokenizer and a recursive-descent parser (no eval, no regex
splitting of the expression).

    expr       := and ( "||" and )*
    and        := comparison ( "&&" comparison )*       # && binds tighter than ||
    comparison := operand ( "==" | "!=" | ">" | "<" ) operand
    operand    := reference | literal
    reference  := "$" step-id "." field                  # $build.status
    literal    := '...' | "..."                          # an operator inside quotes is literal

`>` and `<` compare text (the seed says so): `'10' < '9'` is true. There are no parentheses and no
escapes, as in the seed. A null output compares as the empty string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planops.engine.references import Lookup, Reference, resolve
from planops.engine.references import parse as parse_reference

Op = Literal["==", "!=", ">", "<"]


class ConditionSyntaxError(ValueError):
    """The expression does not parse; the message says where (1-based column)."""


@dataclass(frozen=True)
class Text:
    text: str


Operand = Reference | Text


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
    ref: Reference | None = None


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
            ref = parse_reference(word)
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


def references(expr: Or) -> list[Reference]:
    out: list[Reference] = []
    for conj in expr.terms:
        for cmp in conj.terms:
            out += [o for o in (cmp.left, cmp.right) if isinstance(o, Reference)]
    return out


def _value(operand: Operand, lookup: Lookup) -> str:
    if isinstance(operand, Text):
        return operand.text
    return resolve(operand, lookup) or ""


def _compare(c: Comparison, lookup: Lookup) -> bool:
    left, right = _value(c.left, lookup), _value(c.right, lookup)
    if c.op == "==":
        return left == right
    if c.op == "!=":
        return left != right
    if c.op == ">":
        return left > right
    return left < right


def evaluate(expr: Or, lookup: Lookup) -> bool:
    """True or False; raises UnsettledReference when an operand names an unsettled step.

    Every reference is resolved (no short-circuit past an unsettled one), so whether a step fails
    for an unsettled reference never depends on the order of the terms.
    """
    values = [[_compare(c, lookup) for c in conj.terms] for conj in expr.terms]
    return any(all(conj) for conj in values)
