"""Label and field selectors, parsed and matched like apimachinery's `labels` and `fields`.

The label selector lexer/parser mirrors labels/selector.go (read via the search tool): operators
`=`, `==`, `!=`, `in`, `notin`, `!key`, `key`, `>`/`<` (integers), comma = AND, and the same error
texts (`unable to parse requirement: ...`, `found 'x', expected: ...`). Field selectors follow
fields/selector.go (`=`, `==`, `!=`, backslash escapes); an unsupported field label is rejected by
the caller with `field label not supported: <label>` (core/v1 conversion funcs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tests.kubeapi.statuses import go_quote
from tests.kubeapi.validation import is_label_value, is_qualified_name

_SPECIAL = set("=!(),><")
_WHITESPACE = set(" \t\r\n")
_TOKENS = {
    ")": "CLOSE",
    ",": "COMMA",
    "!": "NOT",
    "==": "DEQ",
    "=": "EQ",
    ">": "GT",
    "in": "IN",
    "<": "LT",
    "!=": "NEQ",
    "notin": "NOTIN",
    "(": "OPEN",
}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


class SelectorError(ValueError):
    """A selector the real server would reject with 400 BadRequest and this message."""


@dataclass(frozen=True)
class Requirement:
    """One label requirement: key, operator, values."""

    key: str
    op: str  # in notin = == != exists !exists gt lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Requirement.Matches."""
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.op in ("in", "=", "=="):
            return present and value in self.values
        if self.op in ("notin", "!="):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("gt", "lt") and present:
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.op == "gt" else have < want
        return False


def _lex(text: str) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append(("END", ""))
            return items
        if text[pos] in _SPECIAL:
            buf, last = "", None
            while pos < n and text[pos] in _SPECIAL:
                buf += text[pos]
                if buf in _TOKENS:
                    last = (_TOKENS[buf], buf)
                    pos += 1
                elif last is not None:
                    break
                else:
                    pos += 1
            if last is None:
                items.append(("ERROR", f"error expected: keyword found '{buf}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_TOKENS.get(word, "ID"), word))


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        if values and tok in ("IN", "NOTIN"):
            tok = "ID"
        return tok, lit

    def take(self, values: bool = True) -> tuple[str, str]:
        item = self.peek(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok in ("ID", "NOT"):
                try:
                    reqs.append(self.requirement())
                except SelectorError as exc:
                    raise SelectorError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.take()
                if tok == "END":
                    return reqs
                if tok == "COMMA":
                    tok2, lit2 = self.peek()
                    if tok2 not in ("ID", "NOT"):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok == "END":
                return reqs
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        negate = False
        tok, lit = self.take()
        if tok == "NOT":
            negate = True
            tok, lit = self.take()
        if tok != "ID":
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        errs = is_qualified_name(key)
        if errs:
            raise SelectorError(f"<nil>: Invalid value: {go_quote(key)}: {'; '.join(errs)}")
        if negate:
            # `!key` ends the requirement; whatever follows is judged by the caller's loop.
            return Requirement(key, "!exists")
        nxt, _ = self.peek()
        if nxt in ("END", "COMMA"):
            return Requirement(key, "exists")
        tok, lit = self.take(values=False)
        ops = {
            "IN": "in",
            "NOTIN": "notin",
            "EQ": "=",
            "DEQ": "==",
            "NEQ": "!=",
            "GT": "gt",
            "LT": "lt",
        }
        if tok not in ops:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = ops[tok]
        values = self.set_values() if op in ("in", "notin") else self.exact_value()
        for i, value in enumerate(values):
            verrs = is_label_value(value)
            if verrs:
                raise SelectorError(
                    f"values[{i}][{key}]: Invalid value: {go_quote(value)}: {'; '.join(verrs)}"
                )
        if op in ("gt", "lt"):
            try:
                int(values[0])
            except ValueError:
                raise SelectorError(
                    f"values[0]: Invalid value: {go_quote(values[0])}: for 'Gt', 'Lt' operators, "
                    "the value must be an integer"
                ) from None
        return Requirement(key, op, tuple(values))

    def exact_value(self) -> list[str]:
        tok, _ = self.peek()
        if tok in ("END", "COMMA"):
            return [""]
        tok, lit = self.take()
        if tok == "ID":
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")

    def set_values(self) -> list[str]:
        tok, lit = self.take()
        if tok != "OPEN":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == "CLOSE":
            self.take()
            return [""]
        if tok not in ("ID", "COMMA"):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            tok, lit = self.take()
            if tok == "ID":
                values.append(lit)
                tok2, lit2 = self.peek()
                if tok2 == "COMMA":
                    continue
                if tok2 == "CLOSE":
                    self.take()
                    return sorted(set(values))
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == "COMMA":
                if not values:
                    values.append("")
                tok2, _ = self.peek()
                if tok2 == "CLOSE":
                    values.append("")
                    self.take()
                    return sorted(set(values))
                if tok2 == "COMMA":
                    values.append("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")


def parse_label_selector(text: str) -> list[Requirement]:
    """labels.Parse: the requirements (AND-ed), or SelectorError with the real message."""
    if not text:
        return []
    return _Parser(text).parse()


def labels_match(reqs: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    """All requirements hold for `labels`."""
    labels = labels or {}
    return all(r.matches(labels) for r in reqs)


@dataclass(frozen=True)
class FieldTerm:
    """One `field=value` / `field!=value` term."""

    field: str
    value: str
    negate: bool


def _unescape_value(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(
                    f"invalid field selector: invalid escape sequence: {value[i : i + 2]}"
                )
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ch}")
        out.append(ch)
        i += 1
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    terms, cur, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur += text[i : i + 2]
            i += 2
            continue
        if ch == ",":
            terms.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    terms.append(cur)
    return terms


def parse_field_selector(text: str) -> list[FieldTerm]:
    """fields.ParseSelector."""
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        for op in ("!=", "==", "="):
            idx = _find_unescaped(part, op)
            if idx >= 0:
                lhs, rhs = part[:idx], part[idx + len(op) :]
                terms.append(FieldTerm(lhs, _unescape_value(rhs), op == "!="))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
    return terms


def _find_unescaped(part: str, op: str) -> int:
    i = 0
    while i < len(part):
        if part[i] == "\\":
            i += 2
            continue
        if part.startswith(op, i):
            return i
        i += 1
    return -1


def convert_field_terms(
    terms: list[FieldTerm], rename: Callable[[str], str | None]
) -> list[FieldTerm]:
    """Apply the kind's field label conversion; unknown labels -> SelectorError (400)."""
    out = []
    for term in terms:
        label = rename(term.field)
        if label is None:
            raise SelectorError(f"field label not supported: {term.field}")
        out.append(FieldTerm(label, term.value, term.negate))
    return out


def fields_match(terms: list[FieldTerm], fields: Mapping[str, str]) -> bool:
    """Every term holds (a missing field reads as the empty string, like fields.Set.Get)."""
    for term in terms:
        have = fields.get(term.field, "")
        if (have == term.value) == term.negate:
            return False
    return True
