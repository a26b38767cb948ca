"""A training run that stops after an epoch and goes on from its checkpoint ends exactly where
an uninterrupted run ends (robattr.train.checkpoint): same weights, same history."""
from __future__ import annotations

import warnings

import pytest
import torch

from robattr.models import build
from robattr.train import CheckpointWarning, FileCheckpoint, fit


class _Stop(Exception):
    pass


class _StopAfter(FileCheckpoint):
    """Saves like a FileCheckpoint, then interrupts the run after ``epochs`` epochs."""

    def __init__(self, path, stop_after: int, tag: str = ""):
        super().__init__(path, tag)
        self.stop_after = stop_after

    def save(self, state):
        super().save(state)
        if state["epoch"] == self.stop_after:
            raise _Stop


class _Plain(torch.utils.data.Dataset):
    """A dataset the trainer reads through a DataLoader (not held in memory)."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def _data(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)


def _model(seed=0):
    torch.manual_seed(seed)
    return build("cnn", "digits")


RUNS = {
    # in memory: seeded permutation + augmentation on the device; one-cycle per step
    "ce-augment-onecycle": dict(loss="ce", augment="crop+flip", schedule="onecycle"),
    # the adversarial random start draws from torch's global generator
    "at-step-milestones": dict(loss="at", milestones=[2]),
    # read through a DataLoader; cosine schedule
    "trades-dataloader-cosine": dict(loss="trades", schedule="cosine", plain=True),
}


@pytest.mark.parametrize("name", sorted(RUNS))
@pytest.mark.parametrize("stop_after", [1, 2])
def test_resumed_run_equals_uninterrupted(tmp_path, name, stop_after):
    opts = dict(RUNS[name])
    x, y = _data()
    data = _Plain(x, y) if opts.pop("plain", False) else (x, y)
    common = dict(epochs=3, batch_size=32, seed=5, device="cpu", progress=False, **opts)

    whole = _model()
    h_whole = fit(whole, data, **common)

    path = tmp_path / "run.ckpt"
    with pytest.raises(_Stop):
        fit(_model(), data, checkpoint=_StopAfter(path, stop_after, tag=name), **common)
    assert FileCheckpoint(path, tag=name).epochs_done() == stop_after
    resumed = _model(seed=123)        # a fresh, differently initialised module
    h_resumed = fit(resumed, data, checkpoint=FileCheckpoint(path, tag=name), **common)

    for (k, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k
    assert h_resumed.epochs == h_whole.epochs == 3
    assert h_resumed.loss == h_whole.loss
    assert h_resumed.train_acc == h_whole.train_acc
    assert h_resumed.lr == h_whole.lr
    assert h_resumed.saved_tensor_peak_bytes == h_whole.saved_tensor_peak_bytes
    assert h_resumed.peak_memory_bytes == h_whole.peak_memory_bytes


def test_a_finished_checkpoint_trains_no_more(tmp_path):
    x, y = _data()
    ckpt = FileCheckpoint(tmp_path / "run.ckpt")
    first = _model()
    fit(first, (x, y), epochs=2, batch_size=32, device="cpu", progress=False, checkpoint=ckpt)
    again = _model(seed=9)
    hist = fit(again, (x, y), epochs=2, batch_size=32, device="cpu", progress=False,
               checkpoint=ckpt)
    assert hist.epochs == 2
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(),
                                                 again.state_dict().values()))


@pytest.mark.parametrize("damage", ["garbage", "other-tag"])
def test_an_unusable_checkpoint_is_reported_and_ignored(tmp_path, damage):
    x, y = _data()
    path = tmp_path / "run.ckpt"
    if damage == "garbage":
        path.write_bytes(b"not a checkpoint")
    else:
        fit(_model(), (x, y), epochs=1, batch_size=32, device="cpu", progress=False,
            checkpoint=FileCheckpoint(path, tag="another run"))
    with pytest.warns(CheckpointWarning, match="ignoring the checkpoint"):
        hist = fit(_model(), (x, y), epochs=2, batch_size=32, device="cpu", progress=False,
                   checkpoint=FileCheckpoint(path, tag="this run"))
    assert hist.epochs == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FileCheckpoint(path, tag="this run").epochs_done() == 2


def test_a_checkpoint_of_more_epochs_than_asked_is_refused(tmp_path):
    x, y = _data()
    ckpt = FileCheckpoint(tmp_path / "run.ckpt")
    fit(_model(), (x, y), epochs=3, batch_size=32, device="cpu", progress=False, checkpoint=ckpt)
    with pytest.raises(ValueError, match="holds 3 epochs"):
        fit(_model(), (x, y), epochs=2, batch_size=32, device="cpu", progress=False,
            checkpoint=ckpt)


class _OldFormat(_StopAfter):
    """A checkpoint as robattr wrote it before it recorded CPU seconds."""

    def save(self, state):
        state = {**state, "history": {k: v for k, v in state["history"].items()
                                      if k != "cpu_seconds"}}
        super().save(state)


def test_cpu_seconds_are_recorded_per_epoch_and_unknown_for_an_older_checkpoint(tmp_path):
    """Wall seconds count whatever else the machine ran; the process's CPU seconds do not.
    Every epoch records both; an epoch restored from a checkpoint that has no CPU seconds
    is None, and so is the run's mean (not a mean over the epochs that have one)."""
    x, y = _data()
    common = dict(epochs=3, batch_size=32, seed=5, device="cpu", progress=False)
    hist = fit(_model(), (x, y), **common)
    assert len(hist.cpu_seconds) == 3 and all(c > 0 for c in hist.cpu_seconds)
    assert hist.cpu_seconds_per_epoch == pytest.approx(sum(hist.cpu_seconds) / 3)

    path = tmp_path / "run.ckpt"
    with pytest.raises(_Stop):
        fit(_model(), (x, y), checkpoint=_OldFormat(path, 1), **common)
    resumed = fit(_model(), (x, y), checkpoint=FileCheckpoint(path), **common)
    assert resumed.cpu_seconds[0] is None and all(c > 0 for c in resumed.cpu_seconds[1:])
    assert resumed.cpu_seconds_per_epoch is None
