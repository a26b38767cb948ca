"""robattr.chapters.wang2020's Table 2 blocks and its two checks of the released code's conventions
(SSR's channel-averaged eigenvalue, the Keras reading of Uniform Gradient)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from torch import nn

from robattr.bounds import gauss_newton_top_eigenvalue
from robattr.cost import spec
from robattr.chapters import wang2020
from robattr.chapters.wang2020 import setup as wang2020_setup

pytestmark = pytest.mark.usefixtures("one_thread")

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck"]


def write_cifar_jpgs(root, n=2):
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for c in CIFAR10_CLASSES:
            (root / "cifar10-jpg" / split / c).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                    root / "cifar10-jpg" / split / c / f"{i}.jpg")


def test_protocol_methods_take_the_blocks_noise_levels():
    m = wang2020.protocol_methods(3, 5, sg_noise=0.2, ug_radius=0.2)
    assert m["SG"][1]["noise_ratio"] == 0.2 and m["UG"][1]["radius"] == 0.2
    assert m["SG"][1]["n_samples"] == 3 and m["IG"][1]["steps"] == 5
    default = wang2020.protocol_methods(3, 5)
    assert default["SG"][1]["noise_ratio"] == 0.1 and default["UG"][1]["radius"] == 4 / 255
    for bad in (dict(sg_noise=0), dict(ug_radius=-1.0), dict(sg_noise=float("inf"))):
        with pytest.raises(ValueError, match="finite number > 0"):
            wang2020.protocol_methods(3, 5, **bad)


def test_table2_runs_keep_the_blocks_with_data_and_fall_back_when_none_has_any(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_DATA", str(tmp_path))
    lines = []
    runs = wang2020.table2_runs(["CIFAR-10", "Flower", "ImageNet"], dataset="digits", k=4,
                                echo=lines.append)
    assert [r["dataset"] for r in runs] == ["digits"] and runs[0]["k"] == 4
    assert [line.split(":")[0] for line in lines] == ["skipped CIFAR-10", "skipped Flower",
                                                      "skipped ImageNet", "no block has its data here"]
    assert "ImageNet validation images" in lines[2]
    write_cifar_jpgs(tmp_path)
    lines.clear()
    runs = wang2020.table2_runs(["ImageNet", "CIFAR-10"], dataset="digits", k=4, echo=lines.append)
    assert len(runs) == 1 and len(lines) == 1
    assert runs[0] == dict(label="CIFAR-10", dataset="cifar10", size=32, k=20, sg_noise=0.1,
                           ug_radius=4 / 255, split="test", weights=None)
    assert wang2020.table2_runs([], dataset="digits", k=4, echo=lines.append)[0]["dataset"] == "digits"
    with pytest.raises(ValueError, match="unknown Table 2 blocks"):
        wang2020.table2_runs(["MNIST"], dataset="digits", k=4)


def test_prepare_run_draws_correctly_classified_images(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    from robattr import data, zoo

    run = wang2020.table2_runs([], dataset="digits", k=4)[0]
    models = zoo.get_models({run["label"]: spec("digits", "mlp", epochs=1)}, device="cpu",
                            progress=False)
    model, x, methods = wang2020.prepare_run(run, models, n_eval=5, n_samples=2, ig_steps=2,
                                             seed=0, device="cpu")
    assert model is models["CIFAR-10"]
    with pytest.raises(KeyError, match="no zoo model for the run 'CIFAR-10'"):
        wang2020.prepare_run(run, {}, n_eval=5, n_samples=2, ig_steps=2, seed=0, device="cpu")

    x_all, y_all = data.as_tensors(data.load("digits", "test"))
    rows = [int(((x_all - xi).flatten(1).abs().sum(1) == 0).nonzero()[0]) for xi in x]
    assert len(set(rows)) == 5 and bool((model(x).argmax(1) == y_all[rows]).all())
    line = wang2020.run_summary(run, model, x, "mlp")
    assert "test accuracy" in line and line.startswith("digits (8, 8), beside the paper's CIFAR-10 block: mlp")
    assert set(methods) == {"SM", "IG", "SG", "UG"}


# ----------------------------------------------------------------- SSR's eigenvalue in the code
class ChannelMean(nn.Module):
    """A net that sees only the mean over the colour channels: every channel has the same gradient."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x.mean(1, keepdim=True))


def small_net(c, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(c * 16, 12), nn.Tanh(), nn.Linear(12, 5)).double()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), c=st.sampled_from([2, 3]))
def test_the_channel_mean_eigenvalue_is_at_most_one_cth_of_ours_and_equal_when_channels_agree(seed, c):
    x = torch.rand(3, c, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    net = small_net(c, seed)
    ours = gauss_newton_top_eigenvalue(net, x)
    theirs = wang2020.channel_mean_top_eigenvalue(net, x)
    assert bool((theirs <= ours / c * (1 + 1e-9) + 1e-15).all())
    same = ChannelMean(small_net(1, seed))
    assert torch.allclose(wang2020.channel_mean_top_eigenvalue(same, x),
                          gauss_newton_top_eigenvalue(same, x) / c, rtol=1e-9, atol=1e-15)


def test_the_channel_mean_eigenvalue_is_ours_for_one_channel():
    x = torch.rand(4, 1, 4, 4, dtype=torch.float64)
    net = small_net(1, 0)
    assert torch.allclose(wang2020.channel_mean_top_eigenvalue(net, x),
                          gauss_newton_top_eigenvalue(net, x), rtol=1e-10)
    with pytest.raises(ValueError, match="images"):
        wang2020.channel_mean_top_eigenvalue(net, x.flatten(1))


# ----------------------------------------------------------------- UG as the Keras code reads it
def test_keras_ug_is_the_softmax_gradient_times_the_last_noisy_copy():
    net = small_net(1, 1)
    x = torch.rand(2, 1, 4, 4, dtype=torch.float64)
    target = torch.tensor([0, 3])
    got = wang2020.uniform_grad_keras(net, x, target, radius=0.1, n_samples=3, seed=7)
    noise = wang2020_setup._cube_noise(x, 0.1, 3, 7)
    assert float(noise.abs().max()) <= 0.1
    grads = []
    for eta in noise:
        xs = (x + eta).requires_grad_(True)
        p = net(xs).softmax(1)[torch.arange(2), target].sum()
        grads.append(torch.autograd.grad(p, xs)[0])
    assert torch.allclose(got, torch.stack(grads).mean(0) * (x + noise[-1]))


def test_ug_readings_agree_with_ours_where_the_change_vanishes():
    net = small_net(1, 2)
    x = torch.rand(6, 1, 4, 4, dtype=torch.float64) + 0.5
    tiny = wang2020.ug_reading_overlap(net, x, k=4, radius=1e-9, n_samples=2, seed=0)
    assert set(tiny.reading) == {"softmax × last noisy copy (Keras)", "softmax × x",
                                 "logit × last noisy copy"} and len(tiny) == 18
    assert tiny[tiny.reading == "logit × last noisy copy"].overlap.eq(1.0).all()
    assert tiny.overlap.between(0, 1).all()
    with pytest.raises(ValueError, match="n_samples"):
        wang2020.ug_reading_overlap(net, x, k=4, radius=0.1, n_samples=0)


def test_tables_5_6_run_on_imagenet_only_with_the_folder_and_both_weights(tmp_path, monkeypatch):
    folder = tmp_path / "imagenet" / "val" / "n01440764"
    folder.mkdir(parents=True)
    Image.fromarray(np.zeros((12, 12, 3), dtype=np.uint8)).save(folder / "0.JPEG")
    natural, robust = tmp_path / "natural.pt", tmp_path / "robust.pt"
    natural.write_bytes(b"x")
    lines = []
    kw = dict(imagenet_dir=str(tmp_path / "imagenet"), natural_weights=str(natural), echo=lines.append)
    assert wang2020.table56_run(robust_weights="", **kw) is None
    assert wang2020.table56_run(robust_weights=str(robust), **kw) is None
    assert lines[0].startswith("skipped ImageNet: robust weights file not given")
    assert lines[1].startswith(f"skipped ImageNet: robust weights file not found: {robust}")
    robust.write_bytes(b"x")
    run = wang2020.table56_run(robust_weights=str(robust), **kw)
    assert (run["k"], run["size"], run["sg_noise"], run["ug_radius"]) == (1000, 224, 0.2, 0.2)
    assert (run["weights"], run["robust_weights"], run["split"]) == (str(natural), str(robust), "val")
    calls = []
    monkeypatch.setattr("robattr.blocks.pretrained", lambda arch, ds, w, device: calls.append((arch, w)) or w)
    models = wang2020.table5_models(run, {}, device="cpu")
    assert models == {"Natural": str(natural), "AT": str(robust)}
    assert calls == [("resnet50", str(natural)), ("resnet50", str(robust))]
    zoo_models = {"Natural": "n", "AT": "a", "Natural, seed 1": "n1"}
    assert wang2020.table5_models(None, zoo_models, device="cpu") == {"Natural": "n", "AT": "a"}
