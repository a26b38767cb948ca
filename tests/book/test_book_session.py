"""robattr.start(), a notebook's prologue, and run.finish(), its epilogue (issue 40)."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import torch

import robattr
from robattr import precision
from robattr.book.params import ParameterError, check_notebook
from robattr.book.session import NotebookRun, start

CELL = '''seed = 0  # int >= 0 | the seed
device = "cpu"  # device | where to compute
n = 3  # int >= 1 | a count
'''


def test_start_checks_seeds_picks_the_device_and_sets_the_display(monkeypatch):
    monkeypatch.setitem(precision._state, "applied", False)
    with pd.option_context("display.max_columns", 20):
        run = start({"seed": 7, "device": "cpu", "n": 2}, CELL)
        assert pd.get_option("display.max_columns") is None
    assert isinstance(run, NotebookRun) and robattr.start is start
    assert run.params == {"seed": 7, "device": "cpu", "n": 2}
    assert run.device == torch.device("cpu") and run.seed == 7 and run.precision == "fp32"
    assert precision.applied()
    drawn = (random.random(), np.random.rand(), torch.rand(1).item())
    start({"seed": 7, "device": "cpu", "n": 2}, CELL)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == drawn


def test_start_refuses_a_bad_value_before_changing_anything():
    with pd.option_context("display.max_columns", 20):
        with pytest.raises(ParameterError, match="n"):
            start({"seed": 0, "device": "cpu", "n": 0}, CELL)
        assert pd.get_option("display.max_columns") == 20


def test_a_notebook_without_seed_or_device_gets_auto_and_no_seeding():
    run = start({"n": 1}, "n = 1  # int >= 1 | a count\n")
    assert run.seed is None and run.device == robattr.get_device("auto")


def test_checking_alone_changes_no_display_option():
    with pd.option_context("display.max_columns", 20):
        check_notebook({"seed": 0, "device": "cpu", "n": 1}, CELL)
        assert pd.get_option("display.max_columns") == 20


def test_finish_prints_the_seconds_since_start_and_returns_nothing(capsys, monkeypatch):
    run = start({"n": 1}, "n = 1  # int >= 1 | a count\n")
    monkeypatch.setattr(run, "started", run.started - 12.0)
    assert run.finish() is None                  # no bare number as the page's last output
    out = capsys.readouterr().out
    assert out.startswith("notebook compute time: ") and out.endswith(" s\n")
    assert float(out.split(": ")[1].split()[0]) >= 12.0
