"""The papermill pipeline and the CLI, on a tiny book made in a temporary folder."""
from __future__ import annotations

import json

import nbformat
import pytest

from robattr.book import builder, cli, executors, notebooks, profiles
from robattr.book.params import ParameterError
from robattr.book.stamps import STAMPS, read_stamps, stamp


# ----------------------------------------------------------------- discovery and parameters
def test_read_parameters_names_defaults_and_help(book):
    params = notebooks.read_parameters(book / "notebooks" / "ch" / "one.ipynb")
    assert list(params) == ["n", "name", "eps", "epochs", "fail_at"]
    assert params["n"].default == 3 and params["n"].help == "how many squares to print"
    assert params["eps"].default == [0.1, 0.2] and params["name"].type_name == "str"
    assert params["epochs"].rule.text == "int >= 1"


def test_undeclared_parameter_is_refused(make_notebook, tmp_path):
    path = make_notebook(tmp_path / "bad.ipynb", params="n = 3  # a count without a rule\n")
    with pytest.raises(ParameterError, match="parameter 'n' is not declared"):
        notebooks.read_parameters(path)


def test_parameters_cell_must_be_literals(make_notebook, tmp_path):
    path = make_notebook(tmp_path / "bad.ipynb", params="n = len('abc')\n")
    with pytest.raises(ValueError, match="literal default"):
        notebooks.read_parameters(path)


def test_discover_and_find(book):
    nbs = notebooks.discover(book)
    assert [nb.key for nb in nbs] == ["ch/one", "ch/two"]
    assert notebooks.find("ch/two", nbs).key == "ch/two"
    assert notebooks.find("notebooks/ch/one.ipynb", nbs).key == "ch/one"
    with pytest.raises(ParameterError, match="known notebooks: ch/one, ch/two"):
        notebooks.find("nope", nbs)


def test_defaults_by_key_match_the_notebooks_declarations(book):
    one = notebooks.find("ch/one", notebooks.discover(book))
    assert notebooks.defaults("ch/one", book) == one.defaults
    assert one.defaults == {n: p.default for n, p in one.parameters.items()} and one.defaults
    with pytest.raises(ParameterError, match="no notebook 'ch/nope'"):
        notebooks.defaults("ch/nope", book)


def test_project_root_is_found_from_a_subfolder(book):
    assert notebooks.project_root(book / "notebooks" / "ch") == book.resolve()


def test_parse_value_types(book):
    p = notebooks.read_parameters(book / "notebooks" / "ch" / "one.ipynb")
    assert profiles.parse_value("5", p["n"]) == 5
    assert profiles.parse_value("[0.5, 1]", p["eps"]) == [0.5, 1]
    assert profiles.parse_value("0.3", p["eps"]) == [0.3]
    assert profiles.parse_value("other", p["name"]) == "other"
    with pytest.raises(ParameterError, match="'n' must be `int >= 0`, got 'abc'"):
        profiles.parse_value("abc", p["n"])


def test_resolve_layers_and_errors(profile, book, tmp_path):
    nb = notebooks.find("ch/one", notebooks.discover(book))
    prof = profile("defaults: {n: 4, not_here: 1}\nnotebooks:\n  ch/one: {name: p}\n")
    values = profiles.resolve(nb, prof, {"epochs": 7})
    assert values == {"n": 4, "name": "p", "eps": [0.1, 0.2], "epochs": 7, "fail_at": -1}
    with pytest.raises(ParameterError, match=r"unknown parameter 'no_such'.*valid parameters: n, name"):
        profiles.resolve(nb, "quick", {"no_such": 1})
    with pytest.raises(ParameterError, match="ch/one: parameter 'epochs' must be `int >= 1`, got -1"):
        profiles.resolve(nb, "quick", {"epochs": -1})


def test_unknown_profile_and_unknown_notebook_in_profile(profile, quiet, book, tmp_path):
    with pytest.raises(ParameterError, match="unknown profile 'nope'"):
        profiles.load_profile("nope")
    prof = profile("notebooks:\n  ch/three: {n: 1}\n")
    with pytest.raises(ParameterError, match="do not exist"):
        builder.build(book, profile=prof, html=False, log=quiet)


def test_profile_precision_reaches_the_kernel_and_the_stamp(profile, book, tmp_path, monkeypatch):
    monkeypatch.delenv("ROBATTR_PRECISION", raising=False)
    (nb,) = [n for n in notebooks.discover(book) if n.key == "ch/one"]
    params = profiles.resolve(nb, "quick")
    plain = profiles.load_profile("quick")
    assert plain["precision"] is None and "ROBATTR_PRECISION" not in executors.make_job(
        nb, params, plain).env
    assert profiles.effective_precision(plain) == "fp32"
    tf32 = profiles.load_profile(profile("precision: tf32\n"))
    assert executors.make_job(nb, params, tf32).env["ROBATTR_PRECISION"] == "tf32"
    assert stamp(nb, params, "tf32") != stamp(nb, params, "fp32")
    monkeypatch.setenv("ROBATTR_PRECISION", "tf32")
    assert profiles.effective_precision(plain) == "tf32"
    with pytest.raises(ParameterError, match="precision must be one of fp32, tf32, got 'bf16'"):
        profiles.load_profile(profile("precision: bf16\n"))


# ----------------------------------------------------------------- execution
def outputs_text(path):
    nb = nbformat.read(path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def injected_tags(path):
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    return cell.metadata["tags"]


@pytest.mark.slow
def test_build_skips_unchanged_and_reexecutes_on_change(make_notebook, profile, quiet, book, tmp_path):
    out = book / "book" / "ch" / "one.ipynb"
    first = builder.build(book, html=False, progress=False, log=quiet)
    assert first.executed == ["ch/one", "ch/two"] and first.ok
    assert "demo [0, 1, 4]" in outputs_text(out)
    assert injected_tags(out) == ["injected-parameters", "remove-cell"]   # defaults: hidden

    lines = []
    second = builder.build(book, html=False, progress=False, log=lines.append)
    assert second.executed == [] and second.skipped == ["ch/one", "ch/two"]
    assert any("no notebook executed" in line for line in lines)

    # a parameter change re-executes exactly the notebook it touches
    prof = profile("notebooks:\n  ch/one: {n: 4}\n")
    third = builder.build(book, profile=prof, html=False, progress=False, log=quiet)
    assert third.executed == ["ch/one"] and third.skipped == ["ch/two"]
    assert "demo [0, 1, 4, 9]" in outputs_text(out)
    assert injected_tags(out) == ["injected-parameters"]    # other values: shown in the book

    # editing the source re-executes too
    make_notebook(book / "notebooks" / "ch" / "two.ipynb", then=("print('edited')",))
    fourth = builder.build(book, profile=prof, html=False, progress=False, log=quiet)
    assert fourth.executed == ["ch/two"]


@pytest.mark.slow
def test_failure_is_reported_and_never_stamped(profile, quiet, book, tmp_path):
    prof = profile("notebooks:\n  ch/two: {n: 5, fail_at: 5}\n")
    report = builder.build(book, profile=prof, html=False, progress=False, log=quiet)
    assert report.executed == ["ch/one"]          # kept going past the failure
    (failure,) = report.failed
    assert failure.key == "ch/two" and failure.cell == 4
    assert "RuntimeError: asked to fail" in str(failure) and "cell 4" in str(failure)
    stamps = json.loads((book / "book" / STAMPS).read_text())
    assert "ch/two" not in stamps and "ch/one" in stamps
    # the next build tries it again instead of skipping it
    again = builder.build(book, profile=prof, html=False, progress=False, log=quiet)
    assert [f.key for f in again.failed] == ["ch/two"] and again.skipped == ["ch/one"]


@pytest.mark.slow
def test_removed_source_removes_its_executed_notebook(quiet, book):
    builder.build(book, html=False, progress=False, log=quiet)
    (book / "notebooks" / "ch" / "two.ipynb").unlink()
    builder.build(book, html=False, progress=False, log=quiet)
    assert not (book / "book" / "ch" / "two.ipynb").exists()
    assert (book / "book" / "ch" / "one.ipynb").exists()


@pytest.mark.slow
def test_cli_run_one_notebook_with_parameters(quiet, book, capsys):
    rc = cli.main(["run", "ch/one", "-p", "n", "2", "-p", "name", "cli", "--no-html", "--no-progress"])
    assert rc == 0
    assert "cli [0, 1]" in outputs_text(book / "book" / "ch" / "one.ipynb")
    assert not (book / "book" / "ch" / "two.ipynb").exists()
    # the next quick build re-executes it with the profile's values: nothing stale survives
    report = builder.build(book, html=False, progress=False, log=quiet)
    assert "ch/one" in report.executed
    assert "demo [0, 1, 4]" in outputs_text(book / "book" / "ch" / "one.ipynb")


@pytest.mark.slow
def test_cli_run_failure_names_the_cell(book, capsys):
    rc = cli.main(["run", "ch/one", "-p", "fail_at", "3", "--no-html", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "ch/one: cell 4 of the source failed: RuntimeError: asked to fail" in err
    # as in a build: the executed notebook (with its traceback) is kept, no stamp recorded
    assert "asked to fail" in (book / "book" / "ch" / "one.ipynb").read_text()
    assert "ch/one" not in read_stamps(book / "book")


@pytest.mark.slow
def test_cli_run_records_a_stamp_like_build(quiet, book):
    assert cli.main(["run", "ch/one", "--no-html", "--no-progress"]) == 0
    assert "ch/one" in read_stamps(book / "book")
    report = builder.build(book, only="ch/one", html=False, progress=False, log=quiet)
    assert report.skipped == ["ch/one"] and not report.executed


def test_cli_errors_are_one_line_and_before_any_work(book, capsys):
    rc = cli.main(["run", "ch/one", "-p", "no_such", "1"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "unknown parameter 'no_such'" in err and "valid parameters: n, name, eps, epochs, fail_at" in err

    rc = cli.main(["run", "ch/one", "-p", "epochs", "-1"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "ch/one: parameter 'epochs' must be `int >= 1`, got -1" in err
    assert not (book / "book" / "ch").exists()      # nothing was executed


def test_cli_list(book, capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "ch/one" in out and "n" in out and "# int >= 0 | how many squares to print" in out


def test_cli_help_mentions_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for word in ["list", "run", "build", "profiles:", "ROBATTR_DATA"]:
        assert word in out


@pytest.mark.slow
def test_two_builds_at_once_keep_both_stamps(quiet, book):
    """Two builds of different notebooks at the same time, in two processes (as two
    `robattr build --only ...` would be): each merges its stamp under the book's lock,
    instead of writing back the stamps it read at its start."""
    import subprocess
    import sys

    code = ("import sys; from robattr.book import builder\n"
            "r = builder.build(sys.argv[1], only=sys.argv[2], html=False, progress=False,\n"
            "                  log=lambda *a: None)\n"
            "sys.exit(0 if r.executed == [sys.argv[2]] else 1)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(book), key])
             for key in ("ch/one", "ch/two")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    stamps = json.loads((book / "book" / STAMPS).read_text())
    assert set(stamps) == {"ch/one", "ch/two"}
    again = builder.build(book, html=False, progress=False, log=quiet)
    assert again.executed == [] and sorted(again.skipped) == ["ch/one", "ch/two"]
