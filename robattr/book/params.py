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
``robattr.start()`` (through :func:`check_notebook`), which reads the same cell.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Any

# The rule grammar lives in robattr.book.rules; its public names are importable from here too.
from robattr.book.rules import Bound, ParameterError, Rule, parse_rule  # noqa: F401
from robattr.book.rules import _List, _violations

__all__ = ["ParameterError", "Rule", "Parameter", "parse_rule", "read_cell", "check_values",
           "check_notebook", "coerce", "bad_examples", "read_yaml"]


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
        raise RuntimeError("robattr.start() reads the notebook's parameters cell and "
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

    :func:`robattr.start` calls it in a notebook's first code cell: the declarations come
    from the parameters cell (``source``, default: found in IPython's history), the
    values from ``namespace`` (default: the notebook's globals, after papermill's
    injected cell). Returns the checked values; raises :class:`ParameterError`. It checks
    and changes nothing else: :func:`robattr.start`, the notebook's prologue, calls it."""
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


def _accepts(alt, value) -> bool:
    ok, v = Rule._coerce_alt(alt, value)
    return ok and not _violations(alt, v, {})
