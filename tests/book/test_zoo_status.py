"""robattr zoo list: a profile's models, what the zoo holds of each, accuracy against target."""
from __future__ import annotations

import pytest

from robattr import zoo
from robattr.book import cli
from robattr.book.zoo_status import ModelStatus, _number, statuses, summary, table

ONLY = "example/*"


def _use(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))


def _find(rows, label_start, epochs):
    (row,) = [r for r in rows if r.label.startswith(label_start) and r.config["epochs"] == epochs]
    return row


def test_an_empty_zoo_lists_every_model_once_with_the_notebooks_that_ask(tmp_path, monkeypatch):
    _use(monkeypatch, tmp_path)
    rows = statuses(None, "smoke", ONLY)
    assert len({r.key for r in rows}) == len(rows) >= 3
    assert all(r.state == "not trained" and r.test_acc is None and r.met is None for r in rows)
    shared = _find(rows, "digits cnn ce", 1)
    assert shared.notebooks == ["example/attacks_and_defenses", "example/digits_saliency"]
    assert summary(rows) == (f"{len(rows)} model(s): 0 trained (0 meet their target, 0 miss it, "
                             f"0 have none), 0 in progress, {len(rows)} not trained")


def test_trained_and_interrupted_models_are_told_apart(tmp_path, monkeypatch, interrupt_training):
    """A trained model shows the zoo's test accuracy and its recorded seconds; a training
    stopped after its first epoch shows "1 of 15"; two models alike but for their epochs are
    labelled with their epochs."""
    _use(monkeypatch, tmp_path)
    rows = statuses(None, "smoke", ONLY)
    short, long = _find(rows, "digits cnn ce", 1), _find(rows, "digits cnn ce", 15)
    model = zoo.get_config(short.config, progress=False)
    with pytest.raises(interrupt_training(1)):
        zoo.get_config(long.config, progress=False)
    interrupt_training(None)

    rows = statuses(None, "smoke", ONLY)
    short, long = _find(rows, "digits cnn ce", 1), _find(rows, "digits cnn ce", 15)
    assert short.state == "trained" and short.test_acc == pytest.approx(model.zoo_meta["test_acc"])
    assert short.seconds > 0 and short.target is None and short.met is None   # digits: no target
    assert long.state == "in progress" and long.epochs_done == 1
    assert "1 trained (0 meet their target, 0 miss it, 1 have none), 1 in progress" in summary(rows)

    text = table(rows)
    assert len(text) == len(rows) + 1
    line = next(t for t in text if t.startswith("digits cnn ce, epochs 1 "))
    assert f"{100 * short.test_acc:.1f} %" in line and "no target" in line
    assert any(t.startswith("digits cnn ce, epochs 15 ") and " 1 of 15 " in t for t in text)
    md = table(rows, markdown=True)
    assert len(md) == len(rows) + 2 and all(m.count("|") == md[0].count("|") for m in md)


@pytest.mark.parametrize("accuracy, met", [(0.99, True), (0.5, False)])
def test_a_trained_model_is_judged_against_its_target(accuracy, met):
    cfg = zoo.config("mnist", "mlp", "ce")
    row = ModelStatus("k", cfg, ["a/b"], "trained", cfg["epochs"], accuracy, 12.0)
    assert row.target is not None and row.met is met
    assert row.target.least < 0.99 and row.target.least > 0.5
    (line,) = table([row])[1:]
    assert ("met" if met else "missed") in line.split() and "LeCun" in line
    assert "1 meet their target" in summary([row]) if met else "1 miss it" in summary([row])


def test_radii_read_in_255ths_and_other_settings_as_numbers():
    assert _number(8 / 255, "eps") == "8/255" and _number(0.25 / 255, "eps") == "0.25/255"
    assert _number(0.1, "eps") == "0.1" and _number(0.1, "lam") == "0.1" and _number(3) == "3"


def test_cli_lists_a_profiles_models(tmp_path, monkeypatch, capsys):
    _use(monkeypatch, tmp_path)
    assert cli.main(["zoo", "list", "--profile", "smoke", "--only", "example/digits_saliency",
                     "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| model | seed |" in out and "1 not trained" in out
