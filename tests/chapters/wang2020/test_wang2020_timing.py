"""robattr.chapters.wang2020.interleaved_step_seconds: Table 3's cost, timed fresh on the same batches."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from robattr.chapters.wang2020 import interleaved_step_seconds
from robattr.train import Loss


class Recording(Loss):
    """Cross-entropy that remembers every batch it was called on (and, in ``calls``, the
    order of the calls across every Recording sharing that list)."""

    name = "recording"
    defaults = {}

    def __init__(self, label, calls, **hparams):
        super().__init__(**hparams)
        self.__dict__.update(label=label, calls=calls, seen=[])

    def __call__(self, model, x, y):
        self.seen.append((x.detach().clone(), y.detach().clone()))
        self.calls.append(self.label)
        return F.cross_entropy(model(x), y), {}


def net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))


def data(n=40):
    g = torch.Generator().manual_seed(1)
    return torch.rand(n, 1, 3, 4, generator=g), torch.randint(0, 3, (n,), generator=g)


def recorders(names):
    calls = []
    return {n: Recording(n, calls) for n in names}, calls


def test_positive_times_per_method_paired_by_round():
    x, y = data()
    models = {"a": net(0), "b": net(1), "c": net(2)}
    losses, _ = recorders(models)
    t = interleaved_step_seconds(models, x, y, batch_size=8, rounds=4, losses=losses)
    assert list(t) == ["a", "b", "c"]
    for v in t.values():
        assert v.shape == (4,) and np.all(np.isfinite(v)) and np.all(v > 0)


def test_every_method_steps_on_the_same_batches_in_alternating_order():
    x, y = data()
    models = {"a": net(0), "b": net(1)}
    losses, calls = recorders(models)
    interleaved_step_seconds(models, x, y, batch_size=6, rounds=3, seed=5, losses=losses)
    # a warm-up step each, then one timed step per round
    assert all(len(loss.seen) == 4 for loss in losses.values())
    for (xa, ya), (xb, yb) in zip(losses["a"].seen, losses["b"].seen):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
        assert len(xa) == 6
    rounds = [tuple(losses["a"].seen[i][0].flatten(1)[:, 0].tolist()) for i in (1, 2, 3)]
    assert len(set(rounds)) == 3                                      # a fresh batch each round
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]          # warm-up, then alternate


def test_seed_fixes_the_batches_and_models_are_not_touched():
    x, y = data()
    models = {"a": net(0), "b": net(1)}
    before = {n: [p.detach().clone() for p in m.parameters()] for n, m in models.items()}
    modes = {n: m.eval().training for n, m in models.items()}
    seen = []
    for _ in range(2):
        losses, _ = recorders(models)
        interleaved_step_seconds(models, x, y, batch_size=5, rounds=2, seed=3, losses=losses)
        seen.append([b[0] for b in losses["a"].seen])
    assert all(torch.equal(p, q) for p, q in zip(*seen))
    for n, m in models.items():
        assert all(torch.equal(p, q) for p, q in zip(m.parameters(), before[n]))
        assert all(p.grad is None for p in m.parameters())
        assert m.training == modes[n]


def test_the_clock_is_what_is_reported():
    x, y = data()
    ticks = iter(np.arange(0.0, 100.0, 0.5))
    models = {"a": net(0), "b": net(1)}
    losses, _ = recorders(models)
    t = interleaved_step_seconds(models, x, y, batch_size=4, rounds=3, losses=losses,
                                 clock=lambda: float(next(ticks)))
    for v in t.values():
        assert np.allclose(v, 0.5)


def test_zoo_configuration_is_the_default_loss():
    x, y = data()
    m = net(0)
    m.zoo_meta = {"config": {"method": "ce", "loss": {}}}
    t = interleaved_step_seconds({"ce": m}, x, y, batch_size=4, rounds=2)
    assert t["ce"].shape == (2,) and np.all(t["ce"] > 0)
    t = interleaved_step_seconds({"ce": net(1)}, x, y, batch_size=4, rounds=2, losses={"ce": ("ce", {})})
    assert np.all(t["ce"] > 0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=41), "larger than"),
    (dict(batch_size=4, rounds=0), "rounds"),
    (dict(batch_size=4, rounds=1.5), "rounds"),
    (dict(batch_size=4, seed=-1), "seed"),
    (dict(batch_size=True), "batch_size"),
])
def test_bad_counts_are_refused(kwargs, match):
    x, y = data()
    with pytest.raises(ValueError, match=match):
        interleaved_step_seconds({"a": net()}, x, y, losses={"a": "ce"}, **kwargs)


def test_bad_models_data_and_losses_are_refused():
    x, y = data()
    with pytest.raises(ValueError, match="non-empty"):
        interleaved_step_seconds({}, x, y, batch_size=4)
    with pytest.raises(TypeError, match="torch module"):
        interleaved_step_seconds({"a": "not a model"}, x, y, batch_size=4)
    with pytest.raises(ValueError, match="same"):
        interleaved_step_seconds({"a": net()}, x, y[:-1], batch_size=4, losses={"a": "ce"})
    with pytest.raises(ValueError, match="zoo configuration"):
        interleaved_step_seconds({"a": net()}, x, y, batch_size=4)
    with pytest.raises(ValueError, match="not among the models"):
        interleaved_step_seconds({"a": net()}, x, y, batch_size=4, losses={"a": "ce", "b": "ce"})
    with pytest.raises(ValueError, match="unknown loss"):
        interleaved_step_seconds({"a": net()}, x, y, batch_size=4, losses={"a": "no such loss"})
