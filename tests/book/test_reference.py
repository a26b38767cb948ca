"""Reference runs (robattr.book.reference, robattr.report.references) and the zoo's train_size."""
from __future__ import annotations

import json
import math
import os

import pandas as pd
import pytest

from robattr import zoo
from robattr.report import papers, references, results
from robattr.book import builder, cli, executors, notebooks, profiles, reference, verdicts_page
from robattr.book.params import ParameterError
from robattr.book.stamps import stamp
from robattr.report.verdicts import VERDICTS, exact

HOLDS, NOT = VERDICTS["holds"], VERDICTS["does not hold"]

PARAMS = '''n = 0  # int >= 0 | violations the claim sees
acc = 0.5  # float | our number for Table 4's beta = 0.3 row
dataset = "digits"  # str | recorded in the provenance
'''
BODY = '''import robattr
run = robattr.start()
import pandas as pd
from IPython.display import display
from robattr.report import papers, verdicts
table = papers.compare(pd.DataFrame({"beta": ["0.3"], "value": [acc]}), "wang2020_table4",
                       on=["beta"], where={"metric": "train_acc"})
print(table.to_json(orient="records"))
display(papers.claim("The claim under test.", verdicts.exact(n, 4)))'''


@pytest.fixture
def book(make_notebook, make_project, tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj")
    make_notebook(root / "notebooks" / "ch" / "one.ipynb", params=PARAMS, cells=(BODY,))
    return root


def printed_table(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    rows = json.loads(next(line for line in text.splitlines() if line.startswith("[")))
    return [r for r in rows if r["beta"] == "0.3"]      # the outer join adds the paper's rows


def markdown_outputs(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return "".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells
                   for o in c.get("outputs", []))


# ----------------------------------------------------------------- in a notebook's process
def test_compare_records_each_row_and_has_no_reference_outside_the_pipeline(monkeypatch):
    monkeypatch.delenv(references.ENV, raising=False)
    before = len(results.rows())
    out = papers.compare(pd.DataFrame({"beta": ["0.3", "0.5"], "value": [0.7, 0.6]}),
                         "wang2020_table4", on=["beta"], where={"metric": "train_acc"})
    assert list(out.columns) == ["beta", "ours", "paper", "note"]
    rows = results.rows()[before:]
    assert [(r["metric"], r["table"], json.loads(r["key"]), r["value"]) for r in rows] == [
        ("compare", "wang2020_table4", ["0.3"], 0.7), ("compare", "wang2020_table4", ["0.5"], 0.6)]
    assert json.loads(rows[0]["where"]) == {"metric": "train_acc"}


def test_compare_and_claim_show_a_handed_reference(tmp_path, monkeypatch):
    folder = tmp_path / "refs"
    folder.mkdir()
    ref_csv = tmp_path / "ref.results.csv"
    monkeypatch.setenv(results.ENV, str(ref_csv))
    papers.compare(pd.DataFrame({"beta": ["0.3", "0.7"], "value": [0.25, 0.5]}),
                   "wang2020_table4", on=["beta"], where={"metric": "train_acc"})
    papers.claim("A claim.", exact(1, 4))
    monkeypatch.delenv(results.ENV)
    reference.install({"medium": {"csv": ref_csv.read_bytes(),
                                  "meta": {"commit": "abcdef0123", "stale": True,
                                           "params": {"dataset": "mnist"}}}}, folder)
    monkeypatch.setenv(references.ENV, str(folder))
    out = papers.compare(pd.DataFrame({"beta": ["0.3", "0.5"], "value": [0.9, 0.8]}),
                         "wang2020_table4", on=["beta"], where={"metric": "train_acc"})
    col = "medium ref (mnist, abcdef0, stale)"
    assert list(out.columns) == ["beta", "ours", col, "paper", "note"]
    got = dict(zip(out["beta"], out[col]))
    assert got["0.3"] == 0.25 and math.isnan(got["0.5"])     # 0.5 was not in the reference
    # a different filter of the same table is a different table
    other = papers.compare(pd.DataFrame({"beta": ["0.3"], "value": [0.9]}), "wang2020_table4",
                           on=["beta"], where={"metric": "train_acc", "note": ""})
    assert math.isnan(other[col].iloc[0])
    text = papers.claim("A claim.", exact(0, 4)).data
    assert f"**{HOLDS}**" in text and f"*{col}: **{NOT}**" in text
    assert "not tested there" in papers.claim("Another claim.", exact(0, 4)).data


# ----------------------------------------------------------------- through the pipeline
@pytest.mark.slow
def test_keep_reference_then_show_it_beside_a_later_build(make_notebook, profile, quiet, book, tmp_path):
    medium = profile("train_size: 7\nnotebooks:\n  ch/one: {n: 2, acc: 0.25, "
                               "dataset: mnist}\n")
    report = builder.build(book, profile=medium, keep_reference="medium", html=False,
                           progress=False, log=quiet)
    assert report.executed == ["ch/one"]
    prov = reference.provenance(book, "medium")["ch/one"]
    assert prov["params"]["n"] == 2 and prov["train_size"] == 7 and prov["profile"] == medium
    assert prov["commit"] == "unknown" and prov["seconds"] > 0 and prov["device"].startswith("CPU")
    assert reference.status(book, "medium") == {"ch/one": "fresh"}

    # the default build shows the medium reference in the table, the claim and the page
    builder.build(book, html=False, progress=False, log=quiet)
    out = book / "book" / "ch" / "one.ipynb"
    (row,) = printed_table(out)
    assert row["ours"] == 0.5 and row["medium ref (mnist)"] == 0.25 and row["paper"] == 0.81
    # the reference ran other parameters: its own numbers and scale, not "the same evidence"
    assert f"*medium ref (mnist): **{NOT}** (" in markdown_outputs(out)
    page = verdicts_page.write(book, log=quiet).read_text()
    assert "| claim | verdict | medium ref | scale | where |" in page
    assert f"| {HOLDS} |" in page and f"| {NOT} <details><summary>numbers</summary>" in page
    assert "## Reference runs" in page
    assert "1 of the 1 claims tested in both this build and the medium reference" in page

    # the reference goes stale when its notebook changes, and says so
    make_notebook(book / "notebooks" / "ch" / "one.ipynb", params=PARAMS,
                  cells=(BODY + "\nprint('edited')",))
    assert reference.status(book, "medium") == {"ch/one": "stale"}
    builder.build(book, html=False, progress=False, log=quiet)
    (row,) = printed_table(out)
    assert row["medium ref (mnist, stale)"] == 0.25
    assert f"{NOT} (stale)" in verdicts_page.write(book, log=quiet).read_text()


def test_robattr_run_into_a_file_shows_the_references_too(profile, quiet, book, tmp_path):
    medium = profile("notebooks:\n  ch/one: {n: 2, acc: 0.25, dataset: mnist}\n")
    builder.build(book, profile=medium, keep_reference="medium", html=False, progress=False,
                  log=quiet)
    nb = notebooks.find("ch/one", notebooks.discover(book))
    out = tmp_path / "one_run.ipynb"
    assert builder.run_one(nb, profiles.resolve(nb, "quick"), root=book, output=out,
                           progress=False) is None
    (row,) = printed_table(out)
    assert row["ours"] == 0.5 and row["medium ref (mnist)"] == 0.25
    assert f"*medium ref (mnist): **{NOT}** (" in markdown_outputs(out)
    assert references.ENV not in os.environ       # handed for the run only


@pytest.mark.slow
def test_a_reference_goes_stale_when_its_profile_changes(profile, quiet, book, tmp_path):
    medium = profile("notebooks:\n  ch/one: {n: 2}\n")
    builder.build(book, profile=medium, keep_reference="medium", html=False, progress=False,
                  log=quiet)
    assert reference.status(book, "medium") == {"ch/one": "fresh"}
    profile("notebooks:\n  ch/one: {n: 3}\n")             # same file, new value
    assert reference.status(book, "medium") == {"ch/one": "stale"}
    profile("train_size: 9\nnotebooks:\n  ch/one: {n: 2}\n")
    assert reference.status(book, "medium") == {"ch/one": "stale"}
    profile("notebooks:\n  ch/one: {n: 2}\n")
    assert reference.status(book, "medium") == {"ch/one": "fresh"}
    (nb,) = notebooks.discover(book)
    assert reference.for_notebook(book, nb)["medium"]["meta"]["stale"] is False


@pytest.mark.slow
def test_keep_reference_keeps_up_to_date_notebooks_too(quiet, book, tmp_path):
    builder.build(book, html=False, progress=False, log=quiet)
    report = builder.build(book, keep_reference="quick", html=False, progress=False, log=quiet)
    assert report.skipped == ["ch/one"] and reference.status(book, "quick") == {"ch/one": "fresh"}
    # a build never shows its own profile's reference beside itself
    (nb,) = notebooks.discover(book)
    assert set(reference.for_notebook(book, nb)) == {"quick"}
    builder.build(book, force=True, html=False, progress=False, log=quiet)
    (row,) = printed_table(book / "book" / "ch" / "one.ipynb")
    assert not any(k.startswith("quick ref") for k in row)


def test_keep_reference_refuses_overrides_and_bad_names(quiet, book):
    with pytest.raises(ParameterError, match="cannot be combined with -p"):
        builder.build(book, overrides={"n": 1}, keep_reference="medium", html=False, log=quiet)
    with pytest.raises(ParameterError, match="bad name"):
        builder.build(book, keep_reference="../x", html=False, log=quiet)


def test_cli_keep_reference_defaults_to_the_profile_name(monkeypatch):
    seen = {}
    monkeypatch.setattr(builder, "build", lambda root, **kw: seen.update(kw) or
                        builder.BuildReport())
    assert cli.main(["build", "--profile", "medium", "--keep-reference", "--no-html"]) == 0
    assert seen["keep_reference"] == "medium"
    assert cli.main(["build", "--keep-reference", "mine", "--no-html"]) == 0
    assert seen["keep_reference"] == "mine"
    assert cli.main(["build", "--no-html"]) == 0 and seen["keep_reference"] is None


def test_status_and_for_notebook_without_references(book):
    (nb,) = notebooks.discover(book)
    assert reference.profiles(book) == [] and reference.for_notebook(book, nb) == {}
    assert reference.status(book, "medium") == {"ch/one": "missing"}


# ----------------------------------------------------------------- train_size
def test_train_size_joins_the_zoo_key_only_when_set(monkeypatch):
    monkeypatch.delenv(zoo.TRAIN_SIZE_ENV, raising=False)
    plain = zoo.config("digits", "mlp")
    assert "train_size" not in plain
    assert zoo.config("digits", "mlp", train_size=100)["train_size"] == 100
    monkeypatch.setenv(zoo.TRAIN_SIZE_ENV, "200")
    assert zoo.config("digits", "mlp")["train_size"] == 200
    assert zoo.config_hash("digits", "mlp") != zoo.config_hash("digits", "mlp", train_size=100)
    monkeypatch.setenv(zoo.TRAIN_SIZE_ENV, "many")
    with pytest.raises(ValueError, match="ROBATTR_TRAIN_SIZE must be an integer"):
        zoo.config("digits", "mlp")
    monkeypatch.setenv(zoo.TRAIN_SIZE_ENV, "")
    assert zoo.config("digits", "mlp") == plain
    with pytest.raises(ValueError, match="train_size"):
        zoo.config("digits", "mlp", train_size=0)


def test_train_size_trains_on_the_first_images(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    monkeypatch.delenv(zoo.TRAIN_SIZE_ENV, raising=False)
    seen = {}
    from robattr import train

    real_fit = train.fit

    def spy(model, train_set, **kw):
        seen["n"] = len(train_set)
        return real_fit(model, train_set, **kw)

    monkeypatch.setattr(train, "fit", spy)
    model = zoo.get_model("digits", "mlp", epochs=1, train_size=50, progress=False)
    assert seen["n"] == 50 and model.zoo_meta["config"]["train_size"] == 50
    assert model.zoo_meta["train_images"] == 50
    # a size above the split's trains on the whole split (a profile-wide cap)
    whole = zoo.get_model("digits", "mlp", epochs=1, train_size=10**6, progress=False)
    assert seen["n"] == 1437 and whole.zoo_meta["train_images"] == 1437


def test_profile_train_size_reaches_the_kernel_and_the_stamp(profile, book, tmp_path, monkeypatch):
    monkeypatch.delenv(zoo.TRAIN_SIZE_ENV, raising=False)
    (nb,) = notebooks.discover(book)
    params = profiles.resolve(nb, "quick")
    prof = profiles.load_profile(profile("train_size: 300\n"))
    assert executors.make_job(nb, params, prof).env[zoo.TRAIN_SIZE_ENV] == "300"
    assert zoo.TRAIN_SIZE_ENV not in executors.make_job(nb, params,
                                                        profiles.load_profile("quick")).env
    assert profiles.effective_train_size(prof) == 300
    assert stamp(nb, params, "fp32", 300) != stamp(nb, params, "fp32")
    assert stamp(nb, params, "fp32", None) == stamp(nb, params)
    per = profiles.load_profile(profile("train_size: {default: 300, 'ch/*': 40, "
                                                  "'ch/two': 7}\n"))
    assert profiles.effective_train_size(per, "ch/one") == 40
    assert profiles.effective_train_size(per, "ch/two") == 7
    assert profiles.effective_train_size(per, "other/x") == 300
    assert executors.make_job(nb, params, per).env[zoo.TRAIN_SIZE_ENV] == "40"
    for bad in ("0", "1.5", "'many'", "true", "{default: 0}", "{'ch/*': x}"):
        with pytest.raises(ParameterError, match="train_size must be an integer >= 1"):
            profiles.load_profile(profile(f"train_size: {bad}\n"))


def test_profile_recipe_reaches_the_kernel_the_stamp_and_the_reference(profile, book, tmp_path,
                                                                        monkeypatch):
    monkeypatch.delenv(zoo.RECIPE_ENV, raising=False)
    (nb,) = notebooks.discover(book)
    params = profiles.resolve(nb, "quick")
    prof = profiles.load_profile(profile("recipe: {cifar10: {augment: crop+flip, "
                                                   "schedule: onecycle}}\n"))
    want = {"cifar10": {"augment": "crop+flip", "schedule": "onecycle"}}
    assert profiles.effective_recipe(prof) == want
    assert json.loads(executors.make_job(nb, params, prof).env[zoo.RECIPE_ENV]) == want
    assert zoo.RECIPE_ENV not in executors.make_job(nb, params,
                                                    profiles.load_profile("quick")).env
    assert stamp(nb, params, "fp32", None, want) != stamp(nb, params, "fp32")
    assert stamp(nb, params, "fp32", None, None) == stamp(nb, params)
    for bad, why in (("{cifar10: {augment: mixup}}", "augment must be one of"),
                     ("{svhn: {augment: crop}}", "unknown dataset"),
                     ("{cifar10: {lr: 0.1}}", "must be a map with"), ("[crop]", "must map")):
        with pytest.raises(ParameterError, match=why):
            profiles.load_profile(profile(f"recipe: {bad}\n"))


@pytest.mark.slow
def test_a_reference_goes_stale_when_its_recipe_changes(profile, quiet, book, tmp_path):
    medium = profile("recipe: {digits: {augment: crop}}\nnotebooks:\n  ch/one: {n: 2}\n")
    builder.build(book, profile=medium, keep_reference="medium", html=False, progress=False,
                  log=quiet)
    assert reference.provenance(book, "medium")["ch/one"]["recipe"] == {"digits": {"augment": "crop"}}
    assert reference.status(book, "medium") == {"ch/one": "fresh"}
    profile("recipe: {digits: {augment: flip}}\nnotebooks:\n  ch/one: {n: 2}\n")
    assert reference.status(book, "medium") == {"ch/one": "stale"}
    profile("notebooks:\n  ch/one: {n: 2}\n")
    assert reference.status(book, "medium") == {"ch/one": "stale"}


def test_medium_profile_loads_and_names_real_datasets():
    prof = profiles.load_profile("medium")
    assert prof["train_size"] and "medium" in profiles.PROFILES
    datasets = {p.get("dataset") for p in prof["notebooks"].values()} - {None}
    assert datasets and datasets <= {"mnist", "fashion_mnist", "cifar10"}
