"""Hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE``:

``dev`` (default)  random examples, so every local ``make test`` explores new cases;
``ci``             derandomized: the same examples on every run, so CI's verdict depends on
                   the commit alone (``.ci/run`` selects it).

A counterexample found locally is kept as an explicit test (see
``test_lim2021_bounds.test_convexity_alone_does_not_make_eq5_exact``).

Every test, and every module's fixtures, start from seeded global RNGs (``random``, NumPy's
legacy global generator, torch on every device), the seed derived from the test's (or
module's) id: a test's draws do not depend on which tests ran before it, so a failure
reproduces alone (``pytest tests/library/x.py::test_y``). The seed comes from the file's name
and the test's, not the file's folder, so moving a file between the rooms of ``tests/``
(library, report, chapters/<key>, book, mirroring the package) leaves its draws as they were.
Tests that want their own stream still pass an explicit ``torch.Generator`` /
``np.random.default_rng``.
"""
import os
import random
import zlib

import numpy as np
import pytest
import torch
from hypothesis import settings

settings.register_profile("dev")
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _seed_key(nodeid: str) -> str:
    """``tests/<room>/test_x.py::test_y`` -> ``tests/test_x.py::test_y``: the key the seeds
    have always been derived from (before the tests moved into rooms)."""
    path, sep, rest = nodeid.partition("::")
    return "tests/" + path.rsplit("/", 1)[-1] + sep + rest


def _seed_all(key: str) -> None:
    seed = zlib.crc32(key.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """The tests' robattr cache (zoo, decoded datasets, plan calibrations): a fresh folder
    for the session unless ``ROBATTR_CACHE`` is set, so a test run neither reads nor
    writes the user's cache (tests that need their own still set it themselves)."""
    if os.environ.get("ROBATTR_CACHE"):
        yield
        return
    os.environ["ROBATTR_CACHE"] = str(tmp_path_factory.mktemp("robattr-cache"))
    try:
        yield
    finally:
        os.environ.pop("ROBATTR_CACHE", None)


@pytest.fixture(autouse=True, scope="session")
def _precision_policy():
    """robattr's precision policy, applied as a notebook's prologue applies it (no import
    does): the tests measure the default, full fp32 with TF32 off."""
    from robattr import precision

    precision.apply()


@pytest.fixture(autouse=True, scope="module")
def _seeded_module(request):
    """Seed before the module's own module-scoped fixtures (autouse ones run first)."""
    _seed_all(request.module.__name__)


@pytest.fixture(autouse=True)
def _seeded_test(request):
    """Seed before every test (and its function-scoped fixtures)."""
    _seed_all(_seed_key(request.node.nodeid))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny nets, many examples: one torch thread is much faster on a shared CPU. A module
    opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture
def interrupt_training(monkeypatch):
    """``interrupt_training(epoch)`` -> an exception type: the next zoo trainings save a
    checkpoint after every epoch and raise it once ``epoch``'s is saved (an interrupted
    training); ``interrupt_training(None)`` lets them run to the end again."""
    from robattr import zoo
    from robattr.train import checkpoint as ckpt_mod

    class Interrupted(Exception):
        pass

    real_save = ckpt_mod.FileCheckpoint.save

    def arm(epoch):
        monkeypatch.setattr(zoo, "CHECKPOINT_SECONDS", 0.0)
        if epoch is None:
            monkeypatch.setattr(ckpt_mod.FileCheckpoint, "save", real_save)
            return Interrupted

        def save_then_stop(self, state):
            real_save(self, state)
            if state["epoch"] == epoch:
                raise Interrupted

        monkeypatch.setattr(ckpt_mod.FileCheckpoint, "save", save_then_stop)
        return Interrupted

    return arm
