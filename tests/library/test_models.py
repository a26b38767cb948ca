"""Tests for robattr.models: shapes, 003's LeNet, Normalize, set_activation, weights."""
from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from robattr import models
from robattr.models import ARCHS, Normalize, build, get_activation, set_activation, using_activation

DIGITS = SimpleNamespace(shape=(1, 8, 8), num_classes=10, mean=(0.3,), std=(0.4,))
CIFAR = SimpleNamespace(shape=(3, 32, 32), num_classes=10,
                        mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616))
SMALL_RGB = SimpleNamespace(shape=(3, 64, 64), num_classes=7, mean=(0.5,) * 3, std=(0.25,) * 3)


def _acts(model):
    return [m for m in model.modules() if isinstance(m, (nn.ReLU, nn.Softplus))]


# --------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("arch", ["mlp", "cnn", "lenet"])
def test_digits_shapes(arch):
    model = build(arch, DIGITS)
    assert model(torch.rand(5, 1, 8, 8)).shape == (5, 10)


@pytest.mark.parametrize("arch", ["lenet", "resnet18_cifar", "resnet20"])
def test_cifar_shapes(arch):
    model = build(arch, CIFAR)
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)


def test_cnn_28x28_and_mlp_any_size():
    info = SimpleNamespace(shape=(1, 28, 28), num_classes=10, mean=(0.13,), std=(0.31,))
    assert build("cnn", info)(torch.rand(2, 1, 28, 28)).shape == (2, 10)
    assert build("mlp", info)(torch.rand(2, 1, 28, 28)).shape == (2, 10)


def test_resnet18_torchvision_small_input():
    model = build("resnet18", SMALL_RGB)
    assert model(torch.rand(2, 3, 64, 64)).shape == (2, 7)


def test_resnet50_constructs_and_runs():
    model = build("resnet50", SMALL_RGB).eval()
    with torch.no_grad():
        assert model(torch.rand(1, 3, 32, 32)).shape == (1, 7)


def test_torchvision_resnet_grey_input():
    info = SimpleNamespace(shape=(1, 32, 32), num_classes=10, mean=(0.5,), std=(0.5,))
    assert build("resnet18", info)(torch.rand(2, 1, 32, 32)).shape == (2, 10)


def test_build_from_dataset_name():
    model = build("cnn", "digits")
    assert model(torch.rand(3, 1, 8, 8)).shape == (3, 10)
    from robattr import data

    info = data.info("digits")
    assert model[0].mean.flatten().tolist() == pytest.approx(list(info.mean))
    assert model[0].std.flatten().tolist() == pytest.approx(list(info.std))


def test_resnet_param_counts():
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(build("resnet20", CIFAR)) == 269_722  # He et al.: 0.27M
    assert count(build("resnet18_cifar", CIFAR)) == 11_173_962  # kuangliu's ResNet18


def test_resnet20_is_option_a():
    model = build("resnet20", CIFAR)
    shortcuts = [m.shortcut for m in model.modules() if isinstance(m, models.BasicBlock)]
    assert len(shortcuts) == 9
    assert sum(isinstance(s, models.LambdaShortcut) for s in shortcuts) == 2
    assert not any(isinstance(m, nn.Conv2d) and m.kernel_size == (1, 1) for m in model.modules())


def test_bad_arch_and_info():
    with pytest.raises(ValueError, match="arch must be one of"):
        build("vgg", DIGITS)
    with pytest.raises(TypeError, match="dataset_or_info"):
        build("mlp", object())


# --------------------------------------------------------------------------- LeNet of 003
def test_lenet_matches_paper_joo2023():
    model = build("lenet", CIFAR)
    layers = list(model)[1:]  # after Normalize
    A = (nn.ReLU,)
    expected = [
        (nn.Conv2d, (3, 32)), A, (nn.Conv2d, (32, 32)), A, (nn.MaxPool2d,),
        (nn.Conv2d, (32, 64)), A, (nn.Conv2d, (64, 64)), A, (nn.MaxPool2d,),
        (nn.Flatten,), (nn.Linear, (4096, 256)), A, (nn.Linear, (256, 10)),
    ]
    assert len(layers) == len(expected)
    for layer, exp in zip(layers, expected):
        assert type(layer) is exp[0]
        if isinstance(layer, nn.Conv2d):
            assert (layer.in_channels, layer.out_channels) == exp[1]
            assert layer.kernel_size == (3, 3) and layer.stride == (1, 1)
            assert layer.padding == (1, 1) and layer.bias is not None
        if isinstance(layer, nn.MaxPool2d):
            assert layer.kernel_size == 2 and layer.stride == 2 and layer.padding == 0
        if isinstance(layer, nn.Linear):
            assert (layer.in_features, layer.out_features) == exp[1]
            assert layer.bias is not None


def test_lenet_input_size_aware():
    model = build("lenet", DIGITS)
    assert model[12].in_features == 64 * 2 * 2


# --------------------------------------------------------------------------- Normalize
@pytest.mark.parametrize("arch", ARCHS)
def test_normalize_is_first_layer(arch):
    info = SMALL_RGB if arch in ("resnet18", "resnet50") else CIFAR
    model = build(arch, info)
    first = next(iter(model.children()))
    assert isinstance(first, Normalize) and model[0] is first
    assert first.mean.shape == (1, 3, 1, 1)
    assert {"0.mean", "0.std"} <= set(model.state_dict()) or \
        {"normalize.mean", "normalize.std"} <= set(model.state_dict())


def test_normalize_values_and_validation():
    norm = Normalize((0.5, 0.25), (0.5, 0.25))
    x = torch.tensor([[0.5, 1.0], [0.25, 0.0]]).reshape(1, 2, 1, 2)
    assert torch.allclose(norm(x), torch.tensor([[0.0, 1.0], [0.0, -1.0]]).reshape(1, 2, 1, 2))
    with pytest.raises(ValueError):
        Normalize((0.5,), (0.0,))
    with pytest.raises(ValueError):
        Normalize((0.5, 0.5), (0.5,))


# --------------------------------------------------------------------------- activations
@pytest.mark.parametrize("arch", ARCHS)
def test_activations_are_modules_not_inplace(arch):
    info = SMALL_RGB if arch in ("resnet18", "resnet50") else CIFAR
    model = build(arch, info)
    acts = _acts(model)
    assert acts and all(isinstance(a, nn.ReLU) and not a.inplace for a in acts)
    assert get_activation(model) == ("relu", None)


@pytest.mark.parametrize("arch", ["mlp", "cnn", "lenet", "resnet20"])
def test_set_activation_keeps_parameters(arch):
    info = DIGITS if arch != "resnet20" else CIFAR
    model = build(arch, info)
    before = {k: (v, v.clone()) for k, v in model.state_dict(keep_vars=True).items()}
    out = set_activation(model, "softplus", beta=3.0)
    assert out is model
    after = model.state_dict(keep_vars=True)
    assert set(after) == set(before)
    for k, (obj, copy) in before.items():
        assert after[k] is obj and torch.equal(after[k], copy)
    acts = _acts(model)
    assert acts and all(isinstance(a, nn.Softplus) and a.beta == 3.0 for a in acts)
    assert (model.activation, model.beta) == ("softplus", 3.0)


def test_set_activation_roundtrip_and_change():
    torch.manual_seed(0)
    model = build("cnn", DIGITS).eval()
    x = torch.rand(8, 1, 8, 8)
    y_relu = model(x)
    y_soft = set_activation(model, "softplus", beta=1.0)(x)
    assert not torch.allclose(y_relu, y_soft, atol=1e-3)
    assert torch.equal(set_activation(model, "relu")(x), y_relu)
    assert get_activation(model) == ("relu", None)


def test_build_with_softplus():
    model = build("lenet", DIGITS, activation="softplus", beta=3)
    assert all(isinstance(a, nn.Softplus) and a.beta == 3.0 for a in _acts(model))
    assert get_activation(model) == ("softplus", 3.0)


def test_using_activation_restores():
    model = build("mlp", DIGITS, activation="softplus", beta=10.0)
    with using_activation(model, "relu"):
        assert all(isinstance(a, nn.ReLU) for a in _acts(model))
    assert get_activation(model) == ("softplus", 10.0)
    assert all(isinstance(a, nn.Softplus) and a.beta == 10.0 for a in _acts(model))


@pytest.mark.parametrize("act,beta", [("softplus", None), ("softplus", 0), ("softplus", -1.0),
                                      ("softplus", float("inf")), ("softplus", "3"),
                                      ("relu", 3.0), ("gelu", None), ("softplus", True)])
def test_set_activation_rejects_bad_input(act, beta):
    model = build("mlp", DIGITS)
    with pytest.raises(ValueError):
        set_activation(model, act, beta)
    assert get_activation(model) == ("relu", None)
    with pytest.raises(ValueError):
        build("mlp", DIGITS, activation=act, beta=beta)


def test_set_activation_rejects_model_without_activation():
    with pytest.raises(ValueError, match="no ReLU or Softplus"):
        set_activation(nn.Sequential(nn.Linear(3, 2)), "softplus", beta=2.0)


_MLP = build("mlp", DIGITS).eval()
_CNN = build("cnn", DIGITS).eval()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), arch=st.sampled_from(["mlp", "cnn"]),
       beta=st.sampled_from([1e3, 1e4]))
def test_softplus_large_beta_approximates_relu(seed, arch, beta):
    model = _MLP if arch == "mlp" else _CNN
    x = torch.rand(4, 1, 8, 8, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        set_activation(model, "relu")
        y_relu = model(x)
        set_activation(model, "softplus", beta=beta)
        y_soft = model(x)
        set_activation(model, "softplus", beta=1.0)
        y_far = model(x)
        set_activation(model, "relu")
    err = (y_soft - y_relu).abs().max().item()
    # each unit is off by at most log(2)/beta; the layers above amplify it only mildly
    assert err < 5.0 / beta
    assert err < (y_far - y_relu).abs().max().item()


# --------------------------------------------------------------------------- weights
def test_weights_roundtrip_torch_and_safetensors(tmp_path):
    from safetensors.torch import save_file

    src = build("resnet18", SMALL_RGB).eval()
    x = torch.rand(1, 3, 64, 64)
    ref = src(x)
    torch.save(src.state_dict(), tmp_path / "full.pt")
    torch.save(src.net.state_dict(), tmp_path / "bare.pth")  # torchvision's own keys
    torch.save({"state_dict": src.state_dict()}, tmp_path / "wrapped.ckpt")
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, tmp_path / "w.safetensors")
    for name in ("full.pt", "bare.pth", "wrapped.ckpt", "w.safetensors"):
        model = build("resnet18", SMALL_RGB, weights=tmp_path / name).eval()
        assert torch.allclose(model(x), ref, atol=1e-6), name


def test_weights_load_uses_weights_only(tmp_path, monkeypatch):
    src = build("mlp", DIGITS)
    torch.save(src.state_dict(), tmp_path / "w.pt")
    seen = []
    real_load = torch.load

    def spy(*args, **kwargs):
        seen.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    build("mlp", DIGITS, weights=tmp_path / "w.pt")
    assert seen == [True]


class _Evil:
    def __reduce__(self):
        return (exec, ("import os; os.environ['ROBATTR_PWNED'] = '1'",))


def test_weights_refuse_pickled_code(tmp_path, monkeypatch):
    monkeypatch.delenv("ROBATTR_PWNED", raising=False)
    torch.save({"0.mean": _Evil()}, tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError):
        build("mlp", DIGITS, weights=tmp_path / "evil.pt")
    import os

    assert "ROBATTR_PWNED" not in os.environ


def test_weights_mismatch_and_missing(tmp_path):
    torch.save(build("mlp", DIGITS).state_dict(), tmp_path / "mlp.pt")
    with pytest.raises(ValueError, match="do not fit"):
        build("cnn", DIGITS, weights=tmp_path / "mlp.pt")
    with pytest.raises(FileNotFoundError):
        build("mlp", DIGITS, weights=tmp_path / "nope.pt")


def test_no_download_by_default(monkeypatch):
    import torch.hub

    def boom(*a, **k):
        raise AssertionError("tried to download")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", boom)
    build("resnet18", SMALL_RGB)
    build("resnet50", SMALL_RGB)


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
def test_torchvision_resnets_use_each_activation_once(arch):
    """Our blocks compute torchvision's function, but call every ReLU module once."""
    import torchvision

    info = {"shape": (3, 32, 32), "num_classes": 5, "mean": (0.5,) * 3, "std": (0.25,) * 3}
    model = models.build(arch, info).eval()
    ref = getattr(torchvision.models, arch)(weights=None, num_classes=5).eval()
    ref.load_state_dict(model.net.state_dict())
    x = torch.rand(2, 3, 32, 32)
    torch.testing.assert_close(model.net(x), ref(x))
    calls = {}
    relus = [m for m in model.modules() if isinstance(m, nn.ReLU)]
    for m in relus:
        m.register_forward_hook(lambda mod, i, o: calls.__setitem__(id(mod), calls.get(id(mod), 0) + 1))
    model(x)
    assert len(calls) == len(relus) and set(calls.values()) == {1}


def test_torchvision_resnet_pickles():
    info = {"shape": (3, 32, 32), "num_classes": 5, "mean": (0.5,) * 3, "std": (0.25,) * 3}
    model = models.build("resnet18", info).eval()
    clone = pickle.loads(pickle.dumps(model))
    x = torch.rand(1, 3, 32, 32)
    torch.testing.assert_close(clone(x), model(x))


def test_predict_and_correctly_classified_agree_with_one_big_batch():
    from robattr.models import correctly_classified, predict

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
    x, y = torch.rand(50, 1, 3, 4), torch.randint(0, 3, (50,))
    whole = model(x).argmax(1)
    assert torch.equal(predict(model, x, batch=7), whole)
    right = (whole == y).nonzero().squeeze(1)
    assert torch.equal(correctly_classified(model, x, y, batch=7), right)
    assert torch.equal(correctly_classified(model, x, y, n=3), right[:3])
    assert correctly_classified(model, x, y, n=0).numel() == 0
    with pytest.raises(ValueError, match="labels"):
        correctly_classified(model, x, y[:10])
