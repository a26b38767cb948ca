"""Parameter rules: the syntax, the checks, and every parameter of every notebook refused
on a bad value before papermill starts."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from robattr.book import builder, cli, html
from robattr.book.notebooks import discover, read_parameters
from robattr.book.params import (ParameterError, bad_examples, check_notebook, check_values,
                            parse_rule, read_cell)

ROOT = Path(__file__).resolve().parents[2]


def ok(rule: str, value, **others) -> bool:
    """Does ``value`` pass ``rule`` (with the other parameters' values ``others``)?"""
    cell = "".join(f"{n} = {v!r}  # float | other\n" if not isinstance(v, (str, list)) else
                   f"{n} = {v!r}  # {'str' if isinstance(v, str) else 'list of float'} | other\n"
                   for n, v in others.items())
    params = read_cell(cell + f"x = None  # {rule} | the parameter under test\n")
    try:
        check_values(params, {**others, "x": value})
    except ParameterError as err:
        assert "'x'" in str(err)
        return False
    return True


@pytest.mark.parametrize("rule, good, bad", [
    ("int >= 1", [1, 7], [0, -3, 2.5, True, "3", None]),
    ("int >= 0", [0, 5], [-1, 1.0]),
    ("float > 0", [0.1, 3, 1e9], [0, -0.5, "a", False, float("nan"), float("inf")]),
    ("float in (0, 1)", [0.5, 1e-9], [0, 1, 1.5]),
    ("float in [0, 1]", [0, 1, 0.3], [-0.01, 1.01]),
    ("int in [8, 64], multiple of 4", [8, 28, 64], [4, 30, 68]),
    ("0 or int >= 8", [0, 8, 100], [1, 7, -8]),
    ('"" or dir', ["", "."], ["/no/such/folder", 0]),
    ("{sm, ixg, ig}", ["sm", "ig"], ["SM", "grad", 1]),
    ("{cpu}", ["cpu"], ["cuda", "auto"]),
    ("bool", [True, False], [0, 1, "yes"]),
    ("str", ["", "a"], [1, None]),
    ("device", ["auto", "cpu", "cuda", "cuda:1"], ["gpu", "cuda:x", "CPU", 0]),
    ("dataset", ["digits", "cifar10", "."], ["imagenet", 3]),
    ("arch", ["cnn", "resnet18"], ["vgg", None]),
    ("loss", ["ce", "at", "l2_cosd"], ["nope", 1]),
    ("list of float > 0", [[1], [0.1, 2]], [[], [0], [1, -1], ["a"], "a"]),
    ("list of int >= 1, len >= 0", [[], [3]], [[0], [1.5]]),
    ("list of float > 0, len >= 2, increasing", [[1, 2], [0.1, 0.2, 5]], [[1], [2, 1], [1, 1]]),
    ("list of {a, b, c}, distinct, len >= 2", [["a", "b"], ["c", "a", "b"]], [["a", "a"], ["a"], ["a", "d"]]),
    ("list of loss, includes {ce, at}", [["ce", "at"], ["at", "trades", "ce"]], [["ce"], ["ce", "nope", "at"]]),
    ("list of float > 0, len == 2", [[1, 2]], [[1], [1, 2, 3]]),
])
def test_rules_accept_and_refuse(rule, good, bad):
    for v in good:
        assert ok(rule, v), (rule, v)
    for v in bad:
        assert not ok(rule, v), (rule, v)


def test_one_number_where_a_list_is_wanted_becomes_a_list_and_ints_stay_ints():
    """An int is a float too, and reaches the notebook as written (8, not 8.0)."""
    params = read_cell("e = [0.1]  # list of float >= 0 | budgets\nn = 1.0  # float > 0 | a size\n")
    assert check_values(params, {"e": 0.3, "n": 2}) == {"e": [0.3], "n": 2}
    assert check_values(params, {"e": (1, 2), "n": 2.5}) == {"e": [1, 2], "n": 2.5}
    assert isinstance(check_values(params, {"e": [1], "n": 2})["n"], int)


def test_bounds_that_name_other_parameters():
    assert ok("float in (0, M]", 0.5, M=1.0) and ok("float in (0, M]", 1.0, M=1.0)
    assert not ok("float in (0, M]", 1.5, M=1.0)
    assert ok("int >= max(g)", 8, g=[1, 8]) and not ok("int >= max(g)", 7, g=[1, 8])
    assert ok("int <= min(g)", 1, g=[1, 8]) and not ok("int <= min(g)", 2, g=[1, 8])
    assert ok("list of float > 0, len == len(g)", [1, 2], g=[3.0, 4.0])
    assert not ok("list of float > 0, len == len(g)", [1], g=[3.0, 4.0])


def test_bounds_from_the_dataset():
    assert ok("int in [1, pixels(dataset)]", 64, dataset="digits")
    assert not ok("int in [1, pixels(dataset)]", 65, dataset="digits")
    assert ok("int in [1, pixels(dataset)]", 784, dataset="mnist")
    assert not ok("int in [0, classes(dataset))", 10, dataset="cifar10")
    assert ok("int in [0, classes(dataset))", 9, dataset="cifar10")
    assert not ok("int in [0, test_size(dataset))", 10000, dataset="mnist")
    # an ImageFolder path: its size is a loader option, so the bound is left to the run
    assert ok("int in [1, pixels(dataset)]", 10 ** 6, dataset=".")


def test_the_error_names_the_parameter_the_rule_and_the_bound_value():
    params = read_cell("M = 1.0  # float > 0 | a bound\nh = 0.5  # float in (0, M] | a norm\n")
    with pytest.raises(ParameterError, match=r"nb/x: parameter 'h' must be `float in \(0, M\]`, "
                                             r"got 2.0 \(not <= M = 1\)"):
        check_values(params, {"M": 1.0, "h": 2.0}, notebook="nb/x")
    with pytest.raises(ParameterError, match=r"unknown parameter 'eps'; valid parameters: M, h"):
        check_values(params, {"M": 1.0, "h": 0.5, "eps": 1})


@pytest.mark.parametrize("text, why", [
    ("integer >= 1", "unknown type 'integer'"),
    ("int >=", "expected"),
    ("int in [0, 1", "expected"),
    ("str > 3", "only int and float take constraints"),
    ("int >= foo(x)", "unknown function 'foo'"),
    ("list of int, sorted", "unknown list condition 'sorted'"),
    ("int >= 1 $", "cannot read"),
])
def test_malformed_rules_are_refused(text, why):
    with pytest.raises(ParameterError, match=f"bad rule .*{why}"):
        parse_rule(text)


def test_a_cell_must_declare_every_parameter_and_every_reference():
    with pytest.raises(ParameterError, match="parameter 'n' is not declared"):
        read_cell("n = 3  # how many\n")
    with pytest.raises(ParameterError, match=r"rule of 'h' refers to undeclared \['M'\]"):
        read_cell("h = 0.5  # float in (0, M] | a norm\n")
    with pytest.raises(ParameterError, match="only `name = literal"):
        read_cell("import os\n")


@given(lo=st.integers(-50, 50), width=st.integers(0, 50), v=st.integers(-120, 120),
       lo_open=st.booleans(), hi_open=st.booleans())
def test_integer_intervals_agree_with_the_comparison(lo, width, v, lo_open, hi_open):
    hi = lo + width
    rule = f"int in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    inside = (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)
    assert ok(rule, v) == inside


def test_check_notebook_reads_the_cell_and_the_namespace():
    source = "n = 3  # int >= 1 | a count\neps = 0.5  # float in (0, 1) | a size\n"
    assert check_notebook({"n": 5, "eps": 0.2}, source=source) == {"n": 5, "eps": 0.2}
    with pytest.raises(ParameterError, match="parameter 'eps'"):
        check_notebook({"n": 5, "eps": 1.2}, source=source)


# ----------------------------------------------------------------- the book's notebooks
def test_every_notebook_declares_every_parameter_and_its_defaults_pass():
    notebooks = discover(ROOT)          # refuses a notebook with an undeclared parameter
    assert len(notebooks) >= 25
    for nb in notebooks:
        assert nb.parameters, nb.key
        defaults = dict(nb.defaults)
        assert check_values(nb.parameters, defaults, notebook=nb.key) is not None
        for p in nb.parameters.values():
            assert p.help, f"{nb.key}: parameter {p.name!r} has no help text"


def test_every_bad_value_of_every_parameter_is_refused_before_papermill(monkeypatch, capsys):
    """``robattr run <nb> -p <name> <bad>`` for every parameter of every notebook: exit 2,
    one line naming the notebook and the parameter, and nothing executed."""
    def started(*args, **kwargs):
        raise AssertionError("the notebook was executed")

    monkeypatch.setattr(builder, "run_one", started)
    monkeypatch.setattr(html, "build_html", started)
    monkeypatch.chdir(ROOT)
    cases = [(nb.key, name, bad) for nb in discover(ROOT)
             for name, p in nb.parameters.items() for bad in bad_examples(p)]
    for key, name, bad in cases:
        text = yaml.safe_dump(bad, default_flow_style=True).strip().removesuffix("\n...")
        rc = cli.main(["run", key, "-p", name, text, "--no-html"])
        err = capsys.readouterr().err.strip()
        assert rc == 2, (key, name, text)
        assert f"{key}: parameter {name!r}" in err and len(err.splitlines()) == 1, (key, name, err)


# ----------------------------------------------------------------- the torch-free catalog
def test_the_catalog_agrees_with_data_models_and_train():
    """The command line checks names and sizes from robattr.catalog without importing
    torch; these must be what the package really has."""
    from robattr import catalog, data, models, train

    assert data.DATASETS == catalog.DATASETS and models.ARCHS == catalog.ARCHS
    own = {n for n, cls in train.LOSSES.items() if cls.__module__.startswith("robattr.")}
    assert own == set(catalog.LOSS_NAMES)
    for name, shape in catalog.SHAPES.items():
        info = data.info(name)
        assert info.shape == shape and info.num_classes == catalog.NUM_CLASSES[name], name
    assert len(data.load("digits", "test")) == catalog.TEST_SIZES["digits"]


def test_checking_parameters_does_not_import_torch():
    """What keeps ``robattr run NB -p NAME BAD`` quick: resolving every notebook's
    parameters imports neither torch nor papermill."""
    import subprocess
    import sys

    code = ("import sys; from robattr.book import notebooks, profiles\n"
            "for nb in notebooks.discover(sys.argv[1]): profiles.resolve(nb, 'quick')\n"
            "print(sorted(m for m in ('torch', 'papermill') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_values_in_exponent_notation_are_numbers():
    """PyYAML alone reads ``1e-3`` as a string; robattr reads it as a number, on the
    command line, in sweeps and in profiles."""
    from robattr.book.params import read_yaml

    assert read_yaml("1e-3") == 1e-3 and read_yaml("-1e-6") == -1e-6 and read_yaml("+2E4") == 2e4
    assert read_yaml("[1e-3, 0.5, 3]") == [1e-3, 0.5, 3]
    assert read_yaml("e5") == "e5" and read_yaml("1.5") == 1.5 and read_yaml("7") == 7


def test_a_bad_value_is_blamed_on_its_own_parameter():
    """delta_max = 0 breaks delta_max's own rule; delta_min, whose bound names it, is not
    the one reported."""
    params = read_cell("delta_min = 1e-4  # float > 0, < delta_max | smallest\n"
                       "delta_max = 0.5  # float > 0 | largest\n")
    with pytest.raises(ParameterError, match="parameter 'delta_max'"):
        check_values(params, {"delta_min": 1e-4, "delta_max": 0})
    with pytest.raises(ParameterError, match=r"parameter 'delta_min' .* \(not < delta_max = 0.001\)"):
        check_values(params, {"delta_min": 0.01, "delta_max": 0.001})


def test_seed_spread_parameters_ask_for_the_verdicts_minimum():
    """A notebook's seeds for a seed-to-seed spread (``natural_seeds``, ``ce_seeds``,
    ``t910_seeds``) are checked by their parameter rule against the verdicts' MIN_SEEDS
    (the models themselves come from the chapters' specs modules, which do not check)."""
    from robattr.report.verdicts import MIN_SEEDS

    found = 0
    for path in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        for name, p in read_parameters(path).items():
            if name in ("natural_seeds", "ce_seeds", "t910_seeds"):
                found += 1
                assert p.rule.text == f"int >= {MIN_SEEDS}", (path.name, name, p.rule.text)
                with pytest.raises(ParameterError):
                    p.rule.check(name, MIN_SEEDS - 1, {})
    assert found >= 4
