"""Notebook parameters, declared once where they are defined.

Each line of a notebook's ``parameters`` cell is one parameter: a name, a literal
default, and a comment that holds its *rule*, then ``|``, then its help::

    epochs = 15  # int >= 1 | training epochs of the zoo model
    T = 0.8  # float in (0, 1) | cosine threshold of the certificate
    h_norm = 0.5  # float in (0, M] | norm of the smoothed map (M is another parameter)
    k = 8  # int in [1, pixels(dataset)] | top-k size, at most the pixels of one channel
    photo_size = 64  # 0 or int >= 8 | side of the photo (0 skips it)
    eps_255 = [2, 4, 8, 16]  # list of float > 0, len >= 2, increasing | budgets on 0-255
    rows = ["CE", "AT"]  # list of {CE, AT, TRADES}, distinct | rows of the table

The rule syntax:

* types: ``int``, ``float`` (an int is a float too, and stays as written), ``str``, ``bool``,
  ``file``, ``dir``, ``path`` (an existing file or folder), and the domain types
  ``dataset`` (a name of :data:`robattr.data.DATASETS` or an ImageFolder path),
  ``arch`` (:data:`robattr.models.ARCHS`), ``loss`` (:data:`robattr.train.LOSSES`),
  ``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``);
* a choice ``{a, b, c}`` (items read as YAML) and a literal (``0``, ``""``);
* constraints on numbers after the type, separated by commas: ``> b``, ``>= b``,
  ``< b``, ``<= b``, ``in [lo, hi]`` (brackets closed, parentheses open),
  ``multiple of n``; a bound ``b`` is a number, another parameter's name, or
  ``max(p)``, ``min(p)``, ``len(p)`` of a list parameter ``p``, or ``pixels(p)``,
  ``classes(p)``, ``test_size(p)`` of a dataset parameter ``p`` (skipped where the
  dataset is an ImageFolder path whose size is not known before loading);
* ``list of <rule>`` then list conditions: ``len >= n`` (or any comparison),
  ``increasing`` (strictly), ``distinct``, ``includes {a, b}``; a list is non-empty
  unless its rule says ``len >= 0``;
* alternatives joined by ``or``: ``0 or int >= 8``, ``"" or file``.

A parameter without a rule is refused, so is a name the cell does not declare.
``robattr run/build/sweep`` check every value against these rules before papermill
starts (:func:`check_values`); the notebook checks its own values with one call,
``robattr.check_params()`` (:func:`check_notebook`), which reads the same cell.
"""
from __future__ import annotations

import ast
import io
import math
import numbers
import os
import re
import sys
import tokenize
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from robattr import catalog

__all__ = ["ParameterError", "Rule", "Parameter", "parse_rule", "read_cell", "check_values",
           "check_notebook", "coerce", "bad_examples", "read_yaml"]


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
    """Parse a rule (see the module docstring); :class:`ParameterError` if it is malformed."""
    return _Parser(text.strip()).rule()


# --------------------------------------------------------------------------- values as text
def _loader():
    import yaml

    class Loader(yaml.SafeLoader):
        """YAML as PyYAML reads it, except that ``1e-3`` and ``-1e-6`` are numbers (PyYAML
        follows YAML 1.1, which reads an exponent without a dot as a string)."""

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789."))
    return Loader


def read_yaml(text: str) -> Any:
    """Read a value or a profile written as YAML (``-p eps 1e-3``, ``[0.1, 1e-2]``)."""
    import yaml

    return yaml.load(text, Loader=_loader())


# --------------------------------------------------------------------------- declarations
@dataclass(frozen=True)
class Parameter:
    """One declared notebook parameter."""

    name: str
    default: Any
    rule: Rule
    help: str = ""

    @property
    def type_name(self) -> str:
        return self.rule.text


def read_cell(source: str, where: str = "the parameters cell") -> dict[str, Parameter]:
    """The parameters a ``parameters`` cell declares, in order.

    Every line must be ``name = literal  # RULE | help``; a line without a rule, a rule
    that does not parse, or a rule that refers to an undeclared parameter is an error."""
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    params: dict[str, Parameter] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise ParameterError(f"{where}: only `name = literal  # RULE | help` lines are "
                                 f"allowed (line {node.lineno})")
        name = node.targets[0].id
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            raise ParameterError(f"{where}: parameter {name!r} needs a literal default "
                                 f"(line {node.lineno})") from None
        comment = comments.get(node.end_lineno, "")
        if "|" not in comment:
            raise ParameterError(f"{where}: parameter {name!r} is not declared: write its rule "
                                 f"before its help, `{name} = ...  # RULE | help` "
                                 f"(e.g. `int >= 1 | ...`)")
        rule_text, help_text = (s.strip() for s in comment.split("|", 1))
        try:
            rule = parse_rule(rule_text)
        except ParameterError as err:
            raise ParameterError(f"{where}: parameter {name!r}: {err}") from None
        params[name] = Parameter(name, default, rule, help_text)
    for p in params.values():
        unknown = p.rule.refs() - set(params)
        if unknown:
            raise ParameterError(f"{where}: the rule of {p.name!r} refers to undeclared "
                                 f"{sorted(unknown)}")
    return params


def coerce(param: Parameter, value: Any, notebook: str | None = None) -> Any:
    """Check the type of one value (not its range) and coerce it; errors name the notebook."""
    try:
        return param.rule.coerce(param.name, value)
    except ParameterError as err:
        raise _located(err, notebook) from None


def _located(err: ParameterError, notebook: str | None) -> ParameterError:
    return ParameterError(f"{notebook}: {err}") if notebook else err


def check_values(params: dict[str, Parameter], values: dict[str, Any],
                 notebook: str | None = None) -> dict[str, Any]:
    """Check a complete set of values against their declarations; return them coerced.

    An unknown name, a missing name or a value that breaks its rule raises
    :class:`ParameterError` naming the parameter (and the notebook, if given)."""
    unknown = [n for n in values if n not in params]
    if unknown:
        raise _located(ParameterError(f"unknown parameter {unknown[0]!r}; valid parameters: "
                                      + ", ".join(params)), notebook)
    missing = [n for n in params if n not in values]
    if missing:
        raise _located(ParameterError(f"parameter {missing[0]!r} has no value"), notebook)
    typed = {n: coerce(params[n], v, notebook) for n, v in values.items()}
    out = {}
    # first each value alone (bounds naming other parameters are skipped), then with the
    # others: a bad value is blamed on its own parameter, not on one whose rule names it
    for others in ({}, typed):
        for name, p in params.items():
            try:
                out[name] = p.rule.check(name, typed[name], others)
            except ParameterError as err:
                raise _located(err, notebook) from None
    return out


def _history_cell() -> str:
    """The latest executed cell that is a declared parameters cell (IPython's ``In``)."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    ip = get_ipython() if get_ipython else None
    if ip is None:
        raise RuntimeError("robattr.check_params() reads the notebook's parameters cell and "
                           "must run inside a notebook; elsewhere call "
                           "robattr.book.params.check_values(read_cell(source), values)")
    for source in reversed(ip.user_ns.get("In", [])):
        if "|" not in source:
            continue
        try:
            params = read_cell(source)
        except (ParameterError, SyntaxError):
            continue
        if params:
            return source
    raise RuntimeError("no declared parameters cell (`name = value  # RULE | help`) has run yet")


def check_notebook(namespace: dict[str, Any] | None = None,
                   source: str | None = None) -> dict[str, Any]:
    """Check the running notebook's parameters against their declarations.

    ``robattr.check_params()`` in a notebook's first code cell: the declarations come
    from the parameters cell (``source``, default: found in IPython's history), the
    values from ``namespace`` (default: the notebook's globals, after papermill's
    injected cell). Returns the checked values; raises :class:`ParameterError`.

    It also sets the book's table display (:func:`robattr.viz.show_whole_tables`), since
    every notebook calls it first."""
    from robattr.viz import show_whole_tables

    show_whole_tables()
    source = source if source is not None else _history_cell()
    params = read_cell(source)
    if namespace is None:
        from IPython import get_ipython

        namespace = get_ipython().user_ns
    return check_values(params, {n: namespace[n] for n in params if n in namespace})


# --------------------------------------------------------------------------- bad values
def bad_examples(param: Parameter) -> list[Any]:
    """Values that break the parameter's rule (for tests and documentation): one of the
    wrong type, and for numbers one just outside a numeric bound."""
    alts = param.rule.alternatives
    wrong_type: Any = {"not": "a value"}
    out = [wrong_type]
    scalars = [a.item if isinstance(a, _List) else a for a in alts]
    wrapped = [isinstance(a, _List) for a in alts]
    for alt, is_list in zip(scalars, wrapped):
        for op, bound in alt.constraints:
            if bound.number is None or alt.type not in ("int", "float"):
                continue
            b = bound.number
            step = 1 if alt.type == "int" else max(abs(b) * 1e-3, 1e-6)
            bad = {">": b, ">=": b - step, "<": b, "<=": b + step}.get(op)
            if bad is None:
                continue
            bad = int(bad) if alt.type == "int" else float(bad)
            if not any(_accepts(a, bad if not w else [bad]) for a, w in zip(alts, wrapped)):
                out.append([bad] if is_list else bad)
    return out


def _violations(alt, v, values: dict[str, Any]) -> list[str]:
    """The conditions of one alternative that a (coerced) value breaks; bounds naming a
    parameter missing from ``values`` are skipped."""
    return Rule._list_violations(alt, v, values) if isinstance(alt, _List) \
        else alt.violations(v, values)


def _accepts(alt, value) -> bool:
    ok, v = Rule._coerce_alt(alt, value)
    return ok and not _violations(alt, v, {})
