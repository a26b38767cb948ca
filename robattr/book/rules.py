"""The grammar of notebook parameter rules: parsing a rule into a :class:`Rule` and
checking a value against it.

The syntax (types, choices, literals, constraints and their bounds, ``list of``, ``or``)
is described in :mod:`robattr.book.params`, which reads the ``parameters`` cell, checks
a notebook's values and re-exports this module's public names (:class:`ParameterError`,
:class:`Rule`, :func:`parse_rule`).
"""
from __future__ import annotations

import ast
import math
import numbers
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from robattr import catalog

__all__ = ["ParameterError", "Bound", "Rule", "parse_rule"]


class ParameterError(ValueError):
    """A notebook parameter is unknown, undeclared, or has a value that cannot work."""


# --------------------------------------------------------------------------- bounds
_FUNCS = ("max", "min", "len", "pixels", "classes", "test_size")


@dataclass(frozen=True)
class Bound:
    """A number, a parameter's value, or a function of one (``pixels(dataset)``)."""

    text: str
    number: float | None = None
    name: str | None = None
    func: str | None = None

    def refs(self) -> set[str]:
        return {self.name} if self.name else set()

    def value(self, values: dict[str, Any]) -> float | None:
        """The bound's value, or None where it is not known before the run."""
        if self.number is not None:
            return self.number
        if self.name not in values:
            return None
        v = values[self.name]
        if self.func is None:
            return v if _is_num(v) else None
        if self.func in ("max", "min", "len"):
            if not isinstance(v, list) or not v:
                return None
            if self.func == "len":
                return len(v)
            nums = [e for e in v if _is_num(e)]
            return (max if self.func == "max" else min)(nums) if len(nums) == len(v) else None
        if not isinstance(v, str):
            return None
        if self.func == "test_size":
            return catalog.TEST_SIZES.get(v)
        if self.func == "classes":
            return catalog.NUM_CLASSES.get(v)
        shape = catalog.SHAPES.get(v)            # None: an ImageFolder path or flowers102, whose
        return shape[1] * shape[2] if shape else None    # image size is a loader option


# --------------------------------------------------------------------------- rules
def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _dataset_ok(v: Any) -> bool:
    return isinstance(v, str) and (v in catalog.DATASETS or os.path.isdir(os.path.expanduser(v)))


def _arch_ok(v: Any) -> bool:
    return isinstance(v, str) and v in catalog.ARCHS


def _loss_ok(v: Any) -> bool:
    """A registered loss: robattr's own, or one a notebook registered before checking."""
    train = sys.modules.get("robattr.train")
    return isinstance(v, str) and v in (train.LOSSES if train else catalog.LOSS_NAMES)


_DEVICE = re.compile(r"(auto|cpu|cuda|cuda:\d+)\Z")

#: type name -> (is the value of this type?, what the type is called in errors)
_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_is_int, "an integer"),
    "float": (_is_num, "a number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "file": (lambda v: isinstance(v, str) and os.path.isfile(os.path.expanduser(v)),
             "an existing file"),
    "dir": (lambda v: isinstance(v, str) and os.path.isdir(os.path.expanduser(v)),
            "an existing folder"),
    "path": (lambda v: isinstance(v, str) and os.path.exists(os.path.expanduser(v)),
             "an existing path"),
    "dataset": (_dataset_ok, "a dataset name (robattr.data.DATASETS) or an ImageFolder path"),
    "arch": (_arch_ok, "an architecture (robattr.models.ARCHS)"),
    "loss": (_loss_ok, "a training loss (robattr.train.LOSSES)"),
    "device": (lambda v: isinstance(v, str) and bool(_DEVICE.match(v)),
               "'auto', 'cpu', 'cuda' or 'cuda:N'"),
}
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


@dataclass(frozen=True)
class _Scalar:
    """One alternative for a single value: a type with constraints, a choice or a literal."""

    type: str | None = None                      # a key of _TYPES
    choices: tuple | None = None                 # {a, b, c}
    literal: Any = None
    is_literal: bool = False
    constraints: tuple = ()                      # (op, Bound) pairs
    multiple_of: float | None = None

    def refs(self) -> set[str]:
        return set().union(*(b.refs() for _, b in self.constraints))

    def coerce(self, v: Any) -> tuple[bool, Any]:
        """(is the value of this alternative's type?, the value coerced)."""
        if self.is_literal:
            same = v == self.literal and type(v) is type(self.literal) or (
                _is_num(v) and _is_num(self.literal) and v == self.literal)
            return same, v
        if self.choices is not None:
            return v in self.choices and not isinstance(v, bool), v
        return _TYPES[self.type][0](v), v

    def violations(self, v: Any, values: dict[str, Any]) -> list[str]:
        out = []
        for op, bound in self.constraints:
            b = bound.value(values)
            if b is not None and not _OPS[op](v, b):
                out.append(f"{op} {bound.text}" + ("" if bound.number is not None else f" = {b:g}"))
        if self.multiple_of is not None and v % self.multiple_of:
            out.append(f"a multiple of {self.multiple_of:g}")
        return out


@dataclass(frozen=True)
class _List:
    item: _Scalar
    length: tuple = ((">=", Bound("1", number=1)),)  # non-empty unless told otherwise
    increasing: bool = False
    distinct: bool = False
    includes: tuple = ()

    def refs(self) -> set[str]:
        return self.item.refs().union(*(b.refs() for _, b in self.length))


@dataclass(frozen=True)
class Rule:
    """A parsed rule: alternatives, each a :class:`_Scalar` or a :class:`_List`."""

    text: str
    alternatives: tuple = field(default=(), compare=False)

    def refs(self) -> set[str]:
        """Names of the other parameters this rule refers to."""
        return set().union(*(a.refs() for a in self.alternatives))

    @property
    def is_list(self) -> bool:
        return any(isinstance(a, _List) for a in self.alternatives)

    def coerce(self, name: str, value: Any) -> Any:
        """Check the value's type (not its range) and return it coerced: a tuple becomes a
        list, and one value where a list is wanted a list of it."""
        if isinstance(value, tuple):
            value = list(value)
        given = value
        if self.is_list and not isinstance(value, list) and not any(
                isinstance(a, _Scalar) and a.coerce(value)[0] for a in self.alternatives):
            value = [value]
        for alt in self.alternatives:
            ok, v = self._coerce_alt(alt, value)
            if ok:
                return v
        raise ParameterError(f"parameter {name!r} must be `{self.text}`, got {given!r}")

    @staticmethod
    def _coerce_alt(alt, value) -> tuple[bool, Any]:
        if isinstance(alt, _Scalar):
            return alt.coerce(value) if not isinstance(value, list) else (False, value)
        if not isinstance(value, list):
            return False, value
        items = [alt.item.coerce(v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]

    def check(self, name: str, value: Any, values: dict[str, Any]) -> Any:
        """Coerce and check the value against every condition; ``values`` holds the other
        parameters that bounds refer to. Returns the coerced value."""
        value = self.coerce(name, value)
        problems = []
        for alt in self.alternatives:
            ok, v = self._coerce_alt(alt, value)
            if not ok:
                continue
            found = _violations(alt, v, values)
            if not found:
                return v
            problems += found
        raise ParameterError(f"parameter {name!r} must be `{self.text}`, got {value!r}"
                             + (f" (not {'; not '.join(problems)})" if problems else ""))

    @staticmethod
    def _list_violations(alt: _List, v: list, values: dict[str, Any]) -> list[str]:
        out = []
        for op, bound in alt.length:
            b = bound.value(values)
            if b is not None and not _OPS[op](len(v), b):
                out.append(f"len {op} {bound.text}")
        for i, e in enumerate(v):
            out += [f"item {i} {p}" for p in alt.item.violations(e, values)]
        if alt.increasing and any(b <= a for a, b in zip(v, v[1:])):
            out.append("increasing")
        if alt.distinct and len({repr(e) for e in v}) != len(v):
            out.append("distinct")
        missing = [c for c in alt.includes if c not in v]
        if missing:
            out.append(f"including {missing}")
        return out


# --------------------------------------------------------------------------- parsing
_TOKEN = re.compile(r"""\s*(?:
      (?P<choice>\{[^}]*\})
    | (?P<op><=|>=|==|!=|<|>)
    | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<str>"[^"]*"|'[^']*')
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>[()\[\],])
    )""", re.VERBOSE)
_LIST_WORDS = {"len", "increasing", "distinct", "includes"}


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, pos = text, [], 0
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise self.error(f"cannot read {text[pos:].strip()!r}")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    def error(self, why: str) -> ParameterError:
        return ParameterError(f"bad rule `{self.text}`: {why}")

    def peek(self, k: int = 0):
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else (None, None)

    def take(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value and tok[1] != value):
            want = value or kind or "more"
            raise self.error(f"expected {want} at {' '.join(t for _, t in self.tokens[self.i:]) or 'the end'}")
        self.i += 1
        return tok[1]

    def at(self, kind=None, value=None) -> bool:
        tok = self.peek()
        return tok[0] is not None and (not kind or tok[0] == kind) and (not value or tok[1] == value)

    # rule := alt ('or' alt)*
    def rule(self) -> Rule:
        alts = [self.alternative()]
        while self.at("name", "or"):
            self.take()
            alts.append(self.alternative())
        if self.at():
            raise self.error(f"unexpected {self.peek()[1]!r}")
        return Rule(self.text, tuple(alts))

    def alternative(self):
        if self.at("name", "list"):
            self.take()
            self.take("name", "of")
            item = self.scalar()
            length, inc, dist, incl = None, False, False, ()
            while self.at("punct", ","):
                self.take()
                word = self.take("name")
                if word == "len":
                    length = (length or ()) + ((self.take("op"), self.bound()),)
                elif word == "increasing":
                    inc = True
                elif word == "distinct":
                    dist = True
                elif word == "includes":
                    incl = _choices(self.take("choice"), self)
                else:
                    raise self.error(f"unknown list condition {word!r}")
            return _List(item, length if length is not None else _List.length, inc, dist, incl)
        return self.scalar()

    def scalar(self) -> _Scalar:
        kind, tok = self.peek()
        if kind == "choice":
            self.take()
            return _Scalar(choices=_choices(tok, self))
        if kind in ("num", "str"):
            self.take()
            return _Scalar(literal=ast.literal_eval(tok), is_literal=True)
        typ = self.take("name")
        if typ not in _TYPES:
            raise self.error(f"unknown type {typ!r}; known: {', '.join(_TYPES)}")
        constraints, multiple = [], None
        first = True
        while True:
            if not first:
                if not (self.at("punct", ",") and self.peek(1)[1] not in _LIST_WORDS):
                    break
                self.take()
            first = False
            if self.at("op"):
                constraints.append((self.take(), self.bound()))
            elif self.at("name", "in"):
                self.take()
                lo_closed = self.take("punct") == "["
                lo = self.bound()
                self.take("punct", ",")
                hi = self.bound()
                hi_closed = self.take("punct") == "]"
                constraints += [(">=" if lo_closed else ">", lo), ("<=" if hi_closed else "<", hi)]
            elif self.at("name", "multiple"):
                self.take()
                self.take("name", "of")
                multiple = float(self.take("num"))
            else:
                if constraints or multiple is not None:
                    raise self.error(f"expected a constraint at {self.peek()[1]!r}")
                break
        if constraints or multiple is not None:
            if typ not in ("int", "float"):
                raise self.error(f"only int and float take constraints, not {typ!r}")
        return _Scalar(type=typ, constraints=tuple(constraints), multiple_of=multiple)

    def bound(self) -> Bound:
        kind, tok = self.peek()
        if kind == "num":
            self.take()
            return Bound(tok, number=float(tok))
        name = self.take("name")
        if self.at("punct", "("):
            if name not in _FUNCS:
                raise self.error(f"unknown function {name!r}; known: {', '.join(_FUNCS)}")
            self.take()
            arg = self.take("name")
            self.take("punct", ")")
            return Bound(f"{name}({arg})", name=arg, func=name)
        return Bound(name, name=name)


def _choices(token: str, parser: _Parser) -> tuple:
    import yaml

    try:
        items = yaml.safe_load("[" + token[1:-1] + "]")
    except yaml.YAMLError:
        raise parser.error(f"cannot read the choice {token}") from None
    if not items:
        raise parser.error("an empty choice")
    return tuple(items)


@lru_cache(maxsize=None)
def parse_rule(text: str) -> Rule:
    """Parse a rule (syntax: :mod:`robattr.book.params`); :class:`ParameterError` if it is malformed."""
    return _Parser(text.strip()).rule()



def _violations(alt, v, values: dict[str, Any]) -> list[str]:
    """The conditions of one alternative that a (coerced) value breaks; bounds naming a
    parameter missing from ``values`` are skipped."""
    return Rule._list_violations(alt, v, values) if isinstance(alt, _List) \
        else alt.violations(v, values)
