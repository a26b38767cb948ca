"""Training batches on the device: every image once per epoch, seeded, converted and
augmented as a whole batch; the learning-rate schedules; the recipe in the zoo's key."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from robattr import zoo
from robattr.data import InMemoryDataset
from robattr.train import fit
from robattr.train.batches import (CROP_PADDING, augment, device_batches, make_scheduler)

CPU = torch.device("cpu")


def _images(n=10, c=3, h=8, w=8):
    return torch.arange(n * c * h * w, dtype=torch.int64).reshape(n, c, h, w).remainder(251) \
        .to(torch.uint8)


def test_every_image_once_per_epoch_converted_from_uint8():
    ds = InMemoryDataset("toy", _images(), torch.arange(10), [str(i) for i in range(10)])
    batches = device_batches(ds, batch_size=4, seed=0, device=CPU)
    assert batches.images.dtype == torch.uint8           # held as stored: a quarter of fp32
    seen = []
    for x, y in batches:
        assert x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
        torch.testing.assert_close(x, ds.images[y].float() / 255)
        seen += y.tolist()
    assert sorted(seen) == list(range(10)) and len(batches) == 3
    again = [y.tolist() for _, y in device_batches(ds, batch_size=4, seed=0, device=CPU)]
    other = [y.tolist() for _, y in device_batches(ds, batch_size=4, seed=1, device=CPU)]
    assert again[0] == [int(v) for v in seen[:4]] and other != again     # seeded


def test_subsets_tensors_and_a_single_last_batch():
    ds = InMemoryDataset("toy", _images(), torch.arange(10), [str(i) for i in range(10)])
    sub = torch.utils.data.Subset(ds, range(9))
    ys = torch.cat([y for _, y in device_batches(sub, batch_size=4, seed=0, device=CPU)])
    assert sorted(ys.tolist()) == list(range(9))
    # 9 = 4 + 4 + 1: BatchNorm cannot train on the last single image
    assert len(device_batches(sub, batch_size=4, seed=0, device=CPU, drop_single=True)) == 2
    x = torch.rand(6, 1, 4, 4)
    got = torch.cat([b for b, _ in device_batches((x, torch.arange(6)), batch_size=6, seed=0,
                                                  device=CPU)])
    assert torch.equal(got.sort(0).values, x.sort(0).values)
    assert device_batches(torch.utils.data.TensorDataset(x, torch.arange(6)), batch_size=2,
                          seed=0, device=CPU) is not None
    assert device_batches([(x[0], 0)] * 3, batch_size=2, seed=0, device=CPU) is None
    raw = _images(6)                                  # uint8 tensors are pixel bytes: / 255
    for held in ((raw, torch.arange(6)), torch.utils.data.TensorDataset(raw, torch.arange(6))):
        got = torch.cat([b for b, _ in device_batches(held, batch_size=6, seed=0, device=CPU)])
        assert got.max() <= 1
        torch.testing.assert_close(got.sort(0).values, (raw.float() / 255).sort(0).values)


def test_crop_is_a_window_of_the_zero_padded_image_and_flip_mirrors():
    x = torch.rand(64, 3, 8, 8)
    g = torch.Generator().manual_seed(0)
    out = augment(x, "crop", g)
    p = CROP_PADDING
    padded = nn.functional.pad(x, (p,) * 4)
    shifts = set()
    for i in range(len(x)):
        hits = [(dy, dx) for dy in range(2 * p + 1) for dx in range(2 * p + 1)
                if torch.equal(out[i], padded[i, :, dy:dy + 8, dx:dx + 8])]
        assert hits, f"image {i} is not a window of its padded copy"
        shifts.add(hits[0])
    assert len(shifts) > 10                                   # the windows vary
    flipped = augment(x, "flip", torch.Generator().manual_seed(0))
    same = [torch.equal(flipped[i], x[i]) for i in range(len(x))]
    mirrored = [torch.equal(flipped[i], x[i].flip(2)) for i in range(len(x))]
    assert all(s or m for s, m in zip(same, mirrored)) and 10 < sum(mirrored) < 54
    both = augment(x, "crop+flip", torch.Generator().manual_seed(3))
    assert both.shape == x.shape
    assert augment(x, "none", g) is x
    torch.testing.assert_close(augment(x, "crop+flip", torch.Generator().manual_seed(3)), both)
    with pytest.raises(ValueError, match="augment must be one of"):
        augment(x, "rotate", g)


def test_schedules():
    def rates(schedule, milestones=None, epochs=4, steps=5):
        opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
        sched, per_step = make_scheduler(opt, schedule, lr=0.1, epochs=epochs,
                                         steps_per_epoch=steps, milestones=milestones)
        out = []
        for _ in range(epochs):
            for _ in range(steps):
                out.append(opt.param_groups[0]["lr"])
                opt.step()
                if per_step:
                    sched.step()
            if sched is not None and not per_step:
                sched.step()
        return out

    assert set(rates("step")) == {0.1}
    assert rates("step", [2])[9] == pytest.approx(0.1) and rates("step", [2])[10] == \
        pytest.approx(0.01)
    cos = rates("cosine")
    assert cos[0] == pytest.approx(0.1) and cos[-1] < 0.002 and cos == sorted(cos, reverse=True)
    one = rates("onecycle")
    assert one[0] < 0.01 and max(one) == pytest.approx(0.1, rel=0.05) and one[-1] < 0.01
    with pytest.raises(ValueError, match="schedule must be one of"):
        make_scheduler(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1), "exp", lr=0.1,
                       epochs=1, steps_per_epoch=1)


def test_fit_trains_with_augmentation_and_a_schedule():
    torch.manual_seed(0)
    x = torch.rand(64, 1, 8, 8)
    y = (x.mean((1, 2, 3)) > 0.5).long()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 2))
    hist = fit(model, (x, y), epochs=3, batch_size=16, lr=0.05, augment="crop+flip",
               schedule="onecycle", progress=False, device="cpu")
    assert hist.epochs == 3 and hist.lr[-1] < 0.05
    with pytest.raises(ValueError, match="held in memory"):
        fit(model, [(x[i], int(y[i])) for i in range(8)], epochs=1, augment="flip",
            progress=False, device="cpu")
    with pytest.raises(ValueError, match="milestones belong"):
        fit(model, (x, y), epochs=1, milestones=[1], schedule="cosine", progress=False,
            device="cpu")


def test_the_recipe_is_part_of_the_zoo_key_only_when_set():
    base = zoo.config("digits", "mlp")
    assert "augment" not in base and "schedule" not in base     # older keys unchanged
    assert zoo.config_hash("digits", "mlp") == zoo.config_hash("digits", "mlp",
                                                               augment="none", schedule="step")
    crop = zoo.config("digits", "mlp", augment="crop+flip", schedule="cosine")
    assert crop["augment"] == "crop+flip" and crop["schedule"] == "cosine"
    assert len({zoo.config_hash("digits", "mlp", augment=a) for a in
                ("none", "crop", "flip", "crop+flip")}) == 4
    with pytest.raises(ValueError, match="augment must be one of"):
        zoo.config("digits", "mlp", augment="mixup")
    with pytest.raises(ValueError, match="schedule must be one of"):
        zoo.config("digits", "mlp", schedule="linear")
    with pytest.raises(ValueError, match="milestones belong"):
        zoo.config("digits", "mlp", milestones=[5], schedule="onecycle")


def test_the_recipe_in_force_comes_from_the_environment_per_dataset(monkeypatch):
    monkeypatch.setenv(zoo.RECIPE_ENV, '{"digits": {"augment": "crop", "schedule": "onecycle"}}')
    cfg = zoo.config("digits", "mlp")
    assert (cfg["augment"], cfg["schedule"]) == ("crop", "onecycle")
    assert "augment" not in zoo.config("mnist", "mlp")          # another dataset: the defaults
    explicit = zoo.config("digits", "mlp", augment="none", schedule="cosine")   # the caller wins
    assert "augment" not in explicit and explicit["schedule"] == "cosine"
    assert zoo.effective_recipe("digits", augment="flip") == ("flip", "onecycle")
    for bad, why in (("not json", "must be JSON"), ('{"svhn": {"augment": "crop"}}',
                                                    "unknown dataset 'svhn'"),
                     ('{"digits": {"augment": "mixup"}}', "augment must be one of"),
                     ('{"digits": {"lr": 1}}', "must be a map with"), ('[1]', "must map")):
        monkeypatch.setenv(zoo.RECIPE_ENV, bad)
        with pytest.raises(ValueError, match=why):
            zoo.config("digits", "mlp")


def test_per_method_train_size_reaches_the_zoo_and_the_profile(monkeypatch, tmp_path):
    import json

    from robattr import catalog, zoo
    from robattr.book import profiles
    from robattr.book.params import ParameterError

    sizes = {"default": 600, "ig_norm": 200}
    assert zoo.effective_train_size(sizes, "ce") == 600
    assert zoo.effective_train_size(sizes, "ig_norm") == 200
    assert zoo.effective_train_size({"igr": 50}, "ce") is None      # no default: whole split
    monkeypatch.setenv(catalog.TRAIN_SIZE_ENV, json.dumps(sizes))
    assert zoo.config("digits", "mlp", "ig_norm")["train_size"] == 200
    assert zoo.config("digits", "mlp", "ce")["train_size"] == 600
    monkeypatch.setenv(catalog.TRAIN_SIZE_ENV, "300")
    assert zoo.config("digits", "mlp", "ig_norm")["train_size"] == 300
    for bad in ({"default": 0}, {"sgd": 5}, {}, {"default": True}, 2.5, "x"):
        with pytest.raises(ValueError):
            catalog.check_train_size(bad)
    monkeypatch.setenv(catalog.TRAIN_SIZE_ENV, "{not json")
    with pytest.raises(ValueError, match="ROBATTR_TRAIN_SIZE"):
        zoo.effective_train_size(None, "ce")
    monkeypatch.delenv(catalog.TRAIN_SIZE_ENV)

    # a profile: notebook globs whose value is a per-method map
    prof_path = tmp_path / "p.yml"
    prof_path.write_text("train_size:\n  default: 1000\n  crosspaper/*: {default: 600, ig_norm: 200}\n")
    prof = profiles.load_profile(str(prof_path))
    assert profiles.effective_train_size(prof, "crosspaper/matrix") == sizes
    assert profiles.effective_train_size(prof, "joo2023/table1_robustness") == 1000
    env = profiles.profile_env(prof, "crosspaper/matrix")
    assert json.loads(env[catalog.TRAIN_SIZE_ENV]) == sizes
    assert profiles.profile_env(prof, "example/x")[catalog.TRAIN_SIZE_ENV] == "1000"
    prof_path.write_text("train_size:\n  crosspaper/*: {default: 600, adam: 2}\n")
    with pytest.raises(ParameterError, match="per-method"):
        profiles.load_profile(str(prof_path))
