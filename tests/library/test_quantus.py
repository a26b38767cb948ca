"""robattr.metrics.quantus_adapter: robattr's attributions under Quantus (the optional
``quantus`` extra; the tests that need Quantus are skipped without it).

* the adapter's maps are robattr's maps (same method, same channel reduction);
* one metric both libraries define agrees: Quantus's Pixel-Flipping is robattr's deletion
  curve (zero baseline, pixels removed in decreasing order of the map) read at 1, 2, ...
  removed pixels;
* Quantus's four robustness metrics run through :func:`robustness` and return finite
  numbers;
* without Quantus the module still imports, and its functions say how to install it.

A digits MLP trained for a second on one thread, four test images.
"""
from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import torch

from robattr import data
from robattr.attributions import METHODS, reduce_channels
from robattr.metrics import deletion
from robattr.metrics import quantus_adapter as QA
from robattr.models import build

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.filterwarnings("ignore::UserWarning")]   # Quantus's advice


def _stack(split, n=None):
    ds = data.load("digits", split)
    idx = range(len(ds)) if n is None else range(n)
    return (torch.stack([ds[i][0] for i in idx]), torch.tensor([int(ds[i][1]) for i in idx]))


@pytest.fixture(scope="module")
def model():
    x, y = _stack("train")
    torch.manual_seed(0)
    m = build("mlp", "digits", "softplus", 3.0)
    opt = torch.optim.Adam(m.parameters(), 1e-2)
    for _ in range(150):
        i = torch.randint(0, len(x), (128,))
        loss = torch.nn.functional.cross_entropy(m(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m.eval()


@pytest.fixture(scope="module")
def batch():
    return _stack("test", 4)


@pytest.fixture
def quantus():
    return pytest.importorskip("quantus")


# --------------------------------------------------------------------------- the adapter
OPTIONS = {
    "grad": {}, "input_x_grad": {}, "integrated_gradients": {"steps": 8},
    "smoothgrad": {"n_samples": 4, "seed": 3}, "guided_backprop": {}, "lrp": {},
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_adapter_maps_equal_robattrs(quantus, model, batch, name):
    x, y = batch
    explain = QA.as_explain_func(name, **OPTIONS[name])
    got = explain(model=model, inputs=x.numpy(), targets=y.numpy())
    assert isinstance(got, np.ndarray) and got.shape == (4, 1, 8, 8)
    want = reduce_channels(METHODS[name](model, x, y, **OPTIONS[name]), "abs_sum", keepdim=True)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_adapter_reduction_targets_and_device_keyword(quantus, model, batch):
    x, y = batch
    full = QA.as_explain_func("grad", reduce=None)(model, x.numpy(), y.numpy(), device="cpu")
    np.testing.assert_allclose(full, METHODS["grad"](model, x, y).numpy(), rtol=1e-6)
    summed = QA.as_explain_func("grad", reduce="sum")(model, x.numpy(), y.numpy())
    np.testing.assert_allclose(summed, full.sum(1, keepdims=True), rtol=1e-6)
    pred = model(x).argmax(1)
    np.testing.assert_allclose(QA.as_explain_func("grad")(model, x.numpy(), None),
                               QA.as_explain_func("grad")(model, x.numpy(), pred.numpy()))
    # a callable with robattr's call shape works as a name does
    np.testing.assert_allclose(QA.as_explain_func(METHODS["grad"])(model, x, y),
                               QA.as_explain_func("grad")(model, x, y))


def test_adapter_inside_a_quantus_metric_gives_robattrs_map(quantus, model, batch):
    """Quantus's own explain path (Metric.explain_batch) returns the adapter's maps."""
    x, y = batch
    metric = quantus.MaxSensitivity(nr_samples=1, disable_warnings=True)
    metric.explain_func = QA.as_explain_func("grad")
    metric.explain_func_kwargs = {}
    got = metric.explain_batch(model, x.numpy(), y.numpy())
    want = reduce_channels(METHODS["grad"](model, x, y), "abs_sum", keepdim=True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


def test_adapter_refuses_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        QA.as_explain_func("no_such_method")
    with pytest.raises(ValueError, match="method"):
        QA.as_explain_func(3)
    with pytest.raises(ValueError, match="reduce"):
        QA.as_explain_func("grad", reduce="median")
    with pytest.raises(ValueError, match="create_graph"):
        QA.as_explain_func("grad", create_graph=True)


# --------------------------------------------------------------------------- Pixel-Flipping
@pytest.mark.parametrize("step", [1, 4])
@pytest.mark.parametrize("via", ["a_batch", "explain_func"])
def test_pixel_flipping_is_robattrs_deletion_curve(quantus, model, batch, step, via):
    """Same baseline (0, robattr's default; Quantus's "black" is the image's minimum, so
    it is given as 0.0), same order (decreasing |grad| summed over channels; the maps
    have no ties, where Quantus's unstable argsort and robattr's index order could
    differ), softmax probability of the label after 1·step, 2·step, ... pixels."""
    x, y = batch
    a = reduce_channels(METHODS["grad"](model, x, y), "abs_sum", keepdim=True)
    flat = a.flatten(1)
    assert all(len(set(row.tolist())) == row.numel() for row in flat), "tied scores"
    metric = quantus.PixelFlipping(features_in_step=step, abs=False, normalise=False,
                                   perturb_baseline=0.0, disable_warnings=True)
    kwargs = ({"a_batch": a.numpy()} if via == "a_batch"
              else {"a_batch": None, "explain_func": QA.as_explain_func("grad")})
    got = np.asarray(metric(model=model, x_batch=x.numpy(), y_batch=y.numpy(),
                            channel_first=True, device="cpu", **kwargs))
    p = flat.shape[1]
    curve = deletion(model, x, a, y, baseline=None, output="prob",
                     ratios=[k / p for k in range(step, p + 1, step)])
    assert got.shape == tuple(curve.scores.shape) == (4, p // step)
    np.testing.assert_allclose(got, curve.scores.numpy(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- robustness
def test_four_robustness_metrics_run_and_are_finite(quantus, model, batch):
    x, y = batch
    df = QA.robustness(model, x, y, "grad", nr_samples=3)
    assert list(df.columns) == list(QA.ROBUSTNESS_METRICS)
    assert df.index.name == "image" and len(df) == 4
    assert np.isfinite(df.to_numpy()).all(), df
    assert (df.to_numpy() >= 0).all()
    assert df.attrs["method"] == "grad" and df.attrs["quantus"] == quantus.__version__
    # the seed makes the call reproducible, and NumPy's global state is put back
    state = np.random.get_state()[1].copy()
    again = QA.robustness(model, x, y, "grad", nr_samples=3)
    np.testing.assert_array_equal(df.to_numpy(), again.to_numpy())
    np.testing.assert_array_equal(np.random.get_state()[1], state)


def test_robustness_options_reach_quantus(quantus, model, batch):
    x, y = batch
    kw = dict(metrics=["Max-Sensitivity"], nr_samples=2)
    big = QA.robustness(model, x, y, **kw)
    small = QA.robustness(model, x, y, **kw,
                          metric_kwargs={"Max-Sensitivity": {"lower_bound": 1e-3}})
    assert list(big.columns) == ["Max-Sensitivity"]
    assert (small["Max-Sensitivity"] < big["Max-Sensitivity"]).all()
    pred = QA.robustness(model, x, None, "smoothgrad", method_kwargs={"n_samples": 2, "seed": 0},
                         **kw)
    assert np.isfinite(pred.to_numpy()).all() and pred.attrs["method"] == "smoothgrad"


def test_robustness_refuses_bad_arguments(quantus, model, batch):
    x, y = batch
    with pytest.raises(ValueError, match="metrics"):
        QA.robustness(model, x, y, metrics=["Sparseness"])
    with pytest.raises(ValueError, match="metric_kwargs"):
        QA.robustness(model, x, y, metric_kwargs={"max": {}})
    with pytest.raises(ValueError, match="nr_samples"):
        QA.robustness(model, x, y, nr_samples=0)
    with pytest.raises(ValueError, match="x must"):
        QA.robustness(model, x[0], y)
    model.train()
    try:
        with pytest.raises(ValueError, match="eval"):
            QA.robustness(model, x, y)
    finally:
        model.eval()


# --------------------------------------------------------------------------- without Quantus
def test_without_quantus_the_module_imports_and_names_the_extra(monkeypatch, model, batch):
    monkeypatch.setitem(sys.modules, "quantus", None)            # `import quantus` fails
    mod = importlib.reload(QA)
    x, y = batch
    with pytest.raises(ImportError, match=r"pip install robattr\[quantus\]"):
        mod.robustness(model, x, y)
    with pytest.raises(ImportError, match=r"pip install robattr\[quantus\]"):
        mod.require_quantus()
