"""Line-based text format for defeasible theories (the DeFAb M4 "pure formal" rendering).

One statement per line, each ending with ``.``; ``%`` or ``#`` starts a comment that runs to the end
of the line; blank lines are ignored. Example::

    % Tweety the penguin (Antoniou et al. 2001)
    bird(tweety).                      # fact
    penguin(opus).
    r1: bird(X) => flies(X).           # defeasible rule
    r2: penguin(X) -> bird(X).         # strict rule
    d1: injured(X) ~> ~flies(X).       # defeater: blocks flies(X), never proves ~flies(X)
    r3: penguin(X) => ~flies(X).
    r3 > r1.                           # superiority
    r4: => sunny.                      # defeasible fact (empty body), propositional atom

Statements:

- fact: ``literal.`` (must be ground);
- rule: ``[label:] body ARROW head.`` with ``body`` a comma-separated list of literals, possibly empty,
  and ARROW one of ``->`` (strict), ``=>`` (defeasible), ``~>`` (defeater). A rule without a label gets
  the first unused one of ``r1``, ``r2``, ... (so ``str`` of the result is explicit and reads back);
- superiority: ``label > label.`` (the labels may be defined further down).

Literals are ``[~]pred`` or ``[~]pred(t1, .., tn)``; terms follow :mod:`rlvr.defab.syntax` (variables
start with an uppercase letter or ``?``). Any error raises :class:`TheoryParseError` naming the line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Union

from rlvr.defab.graph import find_cycle
from rlvr.defab.syntax import Atom, Element, Literal, Rule, RuleKind, Superiority, Theory, TheoryError

__all__ = ["TheoryParseError", "parse_theory", "load_theory", "parse_statements", "parse_literal", "parse_rule"]

_TOKEN = re.compile(r"\s*(?:(?P<arrow>->|=>|~>)|(?P<punct>[(),.:~>])|(?P<name>\??[A-Za-z0-9_]+))")
_ARROWS = {k.value: k for k in RuleKind}


class TheoryParseError(TheoryError):
    """A syntax or well-formedness error, with the 1-based line number it was found on."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def _tokens(text: str, line: int) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if not text[pos:].strip():
                break
            bad = text[pos:].lstrip()[0]
            raise TheoryParseError(line, f"unexpected character {bad!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Line:
    """Recursive-descent reader over the tokens of one statement."""

    def __init__(self, text: str, line: int):
        self.toks, self.i, self.line = _tokens(text, line), 0, line

    def peek(self, k: int = 0) -> Optional[str]:
        return self.toks[self.i + k][1] if self.i + k < len(self.toks) else None

    def kind(self, k: int = 0) -> Optional[str]:
        return self.toks[self.i + k][0] if self.i + k < len(self.toks) else None

    def take(self, want: Optional[str] = None, what: str = "") -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            found = "end of line" if tok is None else repr(tok)
            raise TheoryParseError(self.line, f"expected {what or repr(want)}, found {found}")
        self.i += 1
        return tok

    def fail(self, message: str) -> None:
        raise TheoryParseError(self.line, message)

    def literal(self) -> Literal:
        negated = self.peek() == "~"
        if negated:
            self.i += 1
        pred, args = self.name("a literal"), []
        if self.peek() == "(":
            self.i += 1
            args.append(self.term())
            while self.peek() == ",":
                self.i += 1
                args.append(self.term())
            self.take(")", "',' or ')'")
        try:
            return Literal(Atom(pred, args), negated)
        except TheoryError as e:
            self.fail(str(e))

    def name(self, what: str) -> str:
        """A name token, else an error that says what was expected and what was found."""
        if self.kind() != "name":
            found = "end of line" if self.peek() is None else repr(self.peek())
            self.fail(f"expected {what}, found {found}")
        return self.take()

    def term(self) -> str:
        return self.name("a term")

    def statement(self) -> Union[Literal, tuple, Superiority]:
        """A fact, ``(label or None, body, kind, head)``, or a superiority pair; consumes the final '.'."""
        if self.kind() == "name" and self.peek(1) == ">":
            sup = self.take()
            self.take(">")
            inf = self.name("a rule label")
            item = self._wrap(lambda: Superiority(sup, inf))
        else:
            label = None
            if self.kind() == "name" and self.peek(1) == ":":
                label = self.take()
                self.i += 1
            body = []
            if self.kind() != "arrow":
                body.append(self.literal())
                while self.peek() == ",":
                    self.i += 1
                    body.append(self.literal())
            if self.kind() == "arrow":
                kind = _ARROWS[self.take()]
                item = (label, tuple(body), kind, self.literal())
            elif label is not None or len(body) != 1:
                item = self.take("->", "an arrow '->', '=>' or '~>'")
            else:
                item = body[0]
                if not item.is_ground:
                    self.fail(f"a fact must be ground: {item} (variables start with an uppercase letter or '?')")
        self.take(".", "'.' at the end of the statement")
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()!r} after the end of the statement (one statement per line)")
        return item

    def _wrap(self, build):
        try:
            return build()
        except TheoryError as e:
            self.fail(str(e))


def _strip_comment(line: str) -> str:
    cut = [i for i in (line.find("%"), line.find("#")) if i >= 0]
    return line[:min(cut)] if cut else line


def _read(text: str) -> list[tuple[int, object]]:
    items = []
    for n, raw in enumerate(text.splitlines(), start=1):
        body = _strip_comment(raw)
        if body.strip():
            items.append((n, _Line(body, n).statement()))
    return items


def _label_rules(items: list, taken: set) -> list[tuple[int, Element]]:
    """Give unlabelled rules fresh labels r1, r2, ... that no explicit label uses."""
    out, counter = [], 0
    for n, item in items:
        if isinstance(item, tuple):
            label, body, kind, head = item
            if label is None:
                counter += 1
                while f"r{counter}" in taken:
                    counter += 1
                label = f"r{counter}"
                taken.add(label)
            item = _build_rule(n, label, body, kind, head)
        out.append((n, item))
    return out


def _build_rule(n: int, label: str, body: tuple, kind: RuleKind, head: Literal) -> Rule:
    try:
        return Rule(label, kind, body, head)
    except TheoryError as e:
        raise TheoryParseError(n, str(e)) from None


def parse_statements(text: str) -> list[Element]:
    """Parse statements without cross-checking labels (for answers that refer to a theory's rules)."""
    items = _read(text)
    taken = {item[0] for _, item in items if isinstance(item, tuple) and item[0] is not None}
    return [item for _, item in _label_rules(items, taken)]


def parse_theory(text: str) -> Theory:
    """Parse a whole theory; errors name the line (duplicate labels, unknown labels, superiority cycles)."""
    items = _read(text)
    first_line: dict[str, int] = {}
    for n, item in items:
        if isinstance(item, tuple) and item[0] is not None:
            if item[0] in first_line:
                first = first_line[item[0]]
                raise TheoryParseError(n, f"duplicate rule label {item[0]!r} (first used on line {first})")
            first_line[item[0]] = n
    items = _label_rules(items, set(first_line))
    _check_superiority_lines(items)
    elements = [item for _, item in items]
    return Theory([e for e in elements if isinstance(e, Literal)], [e for e in elements if isinstance(e, Rule)],
                  [e for e in elements if isinstance(e, Superiority)])


def _check_superiority_lines(items: list[tuple[int, Element]]) -> None:
    """Known labels, no rule above itself, and no cycle; the cycle is located only when there is one."""
    labels = {item.label for _, item in items if isinstance(item, Rule)}
    pairs = [(n, item) for n, item in items if isinstance(item, Superiority)]
    for n, item in pairs:
        for lab in (item.superior, item.inferior):
            if lab not in labels:
                raise TheoryParseError(n, f"superiority names unknown rule label {lab!r}")
        if item.superior == item.inferior:
            raise TheoryParseError(n, f"superiority puts rule {item.superior!r} above itself")
    succ: dict[str, list[str]] = {}
    for _, item in pairs:
        succ.setdefault(item.superior, []).append(item.inferior)
    if not find_cycle(succ):
        return
    succ = {}
    for n, item in pairs:  # error path only: find the line that closes the first cycle
        succ.setdefault(item.superior, []).append(item.inferior)
        cycle = find_cycle(succ)
        if cycle:
            raise TheoryParseError(n, "superiority becomes cyclic: " + " > ".join(cycle))


def load_theory(path: Union[str, Path]) -> Theory:
    """Read and parse a theory file (UTF-8)."""
    return parse_theory(Path(path).read_text(encoding="utf-8"))


def _single(text: str, what: str):
    items = _read(text if text.rstrip().endswith(".") else text.rstrip() + ".")
    if len(items) != 1:
        raise TheoryParseError(items[1][0] if items else 1, f"expected exactly one {what}")
    return items[0]


def parse_literal(text: str) -> Literal:
    """One literal, e.g. ``~flies(tweety)`` (a trailing '.' is optional; variables are allowed)."""
    line = _Line(_strip_comment(text).strip().rstrip("."), 1)
    lit = line.literal()
    if line.peek() is not None:
        line.fail(f"unexpected {line.peek()!r} after the literal")
    return lit


def parse_rule(text: str, default_label: str = "r1") -> Rule:
    """One rule, e.g. ``d1: penguin(X) ~> ~flies(X)`` (trailing '.' optional; label optional)."""
    n, item = _single(text, "rule")
    if not isinstance(item, tuple):
        raise TheoryParseError(n, f"expected a rule, found {'a fact' if isinstance(item, Literal) else 'superiority'}")
    label, body, kind, head = item
    return _build_rule(n, label or default_label, body, kind, head)
