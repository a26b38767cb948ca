"""Quantus (Hedström et al. 2023, the field's evaluation library) on robattr's attributions.

An optional extra: ``pip install robattr[quantus]`` (``make quantus`` installs the pins of
``requirements-quantus.txt``). This module imports without Quantus; its functions import
Quantus on first use and raise an ``ImportError`` that names the extra when it is missing.

* :func:`as_explain_func`: any robattr attribution (a name of
  :data:`robattr.attributions.METHODS` or a function with their call shape) as a Quantus
  ``explain_func``: NumPy batches in, one NumPy map per input out, channels reduced as
  robattr's maps are (``"abs_sum"``: ``|a|`` summed over channels, kept as N x 1 x H x W).
* :func:`robustness`: Quantus's four robustness metrics (:data:`ROBUSTNESS_METRICS`:
  Max-Sensitivity, Avg-Sensitivity, Local Lipschitz Estimate, Relative Input Stability),
  computed by Quantus itself, one row per image in a DataFrame.

Quantus perturbs the inputs it is given, and robattr's models take pixels in [0, 1] (their
first layer normalises), so Quantus's noise levels are read in pixel units here. All four
are lower-is-better.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["INSTALL", "ROBUSTNESS_METRICS", "require_quantus", "as_explain_func", "robustness"]

#: How to install the extra, as :func:`require_quantus`'s error says it.
INSTALL = "pip install robattr[quantus]"

#: Quantus's robustness metrics that :func:`robustness` computes: the column name (Quantus's
#: own ``Metric.name``) and the Quantus class.
ROBUSTNESS_METRICS = {
    "Max-Sensitivity": "MaxSensitivity",
    "Avg-Sensitivity": "AvgSensitivity",
    "Local Lipschitz Estimate": "LocalLipschitzEstimate",
    "Relative Input Stability": "RelativeInputStability",
}


def require_quantus():
    """The ``quantus`` module, or an ``ImportError`` that says how to install the extra."""
    try:
        import quantus
    except ImportError as e:
        raise ImportError(
            f"this needs Quantus, robattr's optional extra: {INSTALL} (in zsh quote it: "
            f"'robattr[quantus]'), or `make quantus` in a checkout "
            f"(the pins of requirements-quantus.txt)") from e
    return quantus


def _method(method) -> tuple[Callable, str]:
    from robattr.attributions import METHODS

    if isinstance(method, str):
        if method not in METHODS:
            raise ValueError(f"method must be one of {sorted(METHODS)} or a function with their "
                             f"call shape, got {method!r}")
        return METHODS[method], method
    if not callable(method):
        raise ValueError(f"method must be a method name or a callable, got "
                         f"{type(method).__name__}")
    return method, getattr(method, "__name__", type(method).__name__)


def _model_dtype_device(model: nn.Module) -> tuple[torch.dtype, torch.device]:
    p = next(model.parameters(), None)
    if p is None:
        p = next(model.buffers(), None)
    if p is None or not p.is_floating_point():
        return torch.float32, torch.device("cpu")
    return p.dtype, p.device


def as_explain_func(method="grad", *, reduce="abs_sum", **method_kwargs) -> Callable:
    """A Quantus ``explain_func`` that computes robattr's ``method``.

    The returned ``explain(model, inputs, targets, **kwargs)`` takes NumPy (or torch)
    batches, channel first, as Quantus passes them, runs
    ``method(model, x, targets, **method_kwargs)`` on the model's device and dtype (or on
    ``kwargs["device"]``, which Quantus adds when a metric is given ``device=``), reduces
    the channels with :func:`robattr.attributions.reduce_channels` (``reduce``; the channel
    axis kept, so a map is N x 1 x H x W, which Quantus broadcasts over the channels;
    ``None`` returns the full N x C x H x W attribution) and returns a float NumPy array.
    Other keyword arguments Quantus passes are ignored. ``targets=None`` explains the
    predicted class. Sampling methods take ``seed=`` in ``method_kwargs``: each call then
    draws the same noise, so a metric sees the map change with the input only.
    """
    from robattr.attributions import reduce_channels

    fn, name = _method(method)
    if method_kwargs.get("create_graph"):
        raise ValueError("create_graph=True has no use in a Quantus explain_func (it returns "
                         "NumPy arrays)")
    reduce_channels(torch.zeros(1, 1, 1, 1), reduce)         # a bad reduce fails here

    def explain(model, inputs, targets=None, **kwargs) -> np.ndarray:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        dtype, device = _model_dtype_device(model)
        if kwargs.get("device") is not None:
            device = torch.device(kwargs["device"])
        x = torch.as_tensor(np.asarray(inputs) if not isinstance(inputs, torch.Tensor)
                            else inputs).to(device=device, dtype=dtype)
        t = None
        if targets is not None:
            t = torch.as_tensor(np.asarray(targets) if not isinstance(targets, torch.Tensor)
                                else targets, device=device).reshape(-1).long()
        with torch.enable_grad():
            a = fn(model, x, t, **method_kwargs)
        a = reduce_channels(a.detach(), reduce, keepdim=True)
        return a.cpu().numpy()

    explain.__name__ = f"robattr_{name}"
    explain.__qualname__ = explain.__name__
    return explain


@contextlib.contextmanager
def _numpy_seed(seed):
    """Quantus draws its perturbations from NumPy's global generator: seed it for the
    block, then put its state back."""
    if seed is None:
        yield
        return
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def robustness(model: nn.Module, x: torch.Tensor, y=None, method="grad", *,
               method_kwargs: Mapping | None = None, reduce="abs_sum",
               nr_samples: int | None = None, metrics=None,
               metric_kwargs: Mapping[str, Mapping] | None = None, seed: int | None = 0,
               batch_size: int = 64):
    """Quantus's robustness metrics of robattr's ``method`` on one model and batch.

    ``x`` is a batch N x C x H x W (or N x D) of the model's inputs (pixels in [0, 1] for
    robattr's models), ``y`` the N labels explained (``None``: the predicted classes),
    ``method`` a name of :data:`robattr.attributions.METHODS` or a function with their call
    shape, ``method_kwargs`` its options and ``reduce`` the channel reduction of its maps
    (:func:`as_explain_func`). ``metrics``: names of :data:`ROBUSTNESS_METRICS` (default
    all four). Each metric runs with Quantus's own defaults (noise, norms, normalisation,
    its ``softmax``), except ``nr_samples`` (when given: the perturbations per image, which
    Quantus sets to 200), the progress bar and the warnings (both off); ``metric_kwargs``
    maps a metric's name to further keyword arguments of its Quantus class (e.g.
    ``{"Max-Sensitivity": {"lower_bound": 0.05}}``). ``seed`` seeds NumPy's global
    generator, which Quantus's perturbations draw from, for the call (the state is put
    back after); ``None`` leaves it alone.

    Returns a DataFrame with one row per image (index ``image``) and one column per
    metric, each Quantus's per-image score (lower is more robust). A cell is NaN where
    Quantus returns NaN: by default Relative Input Stability does when a perturbation
    changed the predicted class. ``df.attrs`` records the method, Quantus's version and
    ``nr_samples``. Call ``model.eval()`` first (Quantus refuses a model in training mode).
    """
    import pandas as pd

    from robattr.attributions import resolve_target
    from robattr.utils import check_int

    quantus = require_quantus()
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if model.training:
        raise ValueError("model is in training mode: call model.eval() first (Quantus refuses "
                         "to explain a model in training mode)")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim not in (2, 4) \
            or x.shape[0] == 0:
        raise ValueError(f"x must be a floating batch N x C x H x W or N x D, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    names = list(ROBUSTNESS_METRICS) if metrics is None else list(metrics)
    unknown = [m for m in names if m not in ROBUSTNESS_METRICS]
    if unknown or not names:
        raise ValueError(f"metrics must name some of {list(ROBUSTNESS_METRICS)}, got {metrics!r}")
    metric_kwargs = dict(metric_kwargs or {})
    stray = sorted(set(metric_kwargs) - set(ROBUSTNESS_METRICS))
    if stray:
        raise ValueError(f"metric_kwargs has keys that are not metrics: {stray} (metrics: "
                         f"{list(ROBUSTNESS_METRICS)})")
    if nr_samples is not None:
        check_int("nr_samples", nr_samples, 1)
    check_int("batch_size", batch_size, 1)
    if seed is not None:
        check_int("seed", seed, 0)

    explain = as_explain_func(method, reduce=reduce, **dict(method_kwargs or {}))
    target = resolve_target(model, x.detach(), y).cpu().numpy()
    x_np = x.detach().cpu().float().numpy()
    device = str(x.device)
    out = {}
    for name in names:
        cls = getattr(quantus, ROBUSTNESS_METRICS[name])
        kwargs = {"disable_warnings": True, "display_progressbar": False}
        if nr_samples is not None:
            kwargs["nr_samples"] = nr_samples
        kwargs.update(metric_kwargs.get(name, {}))
        metric = cls(**kwargs)
        with _numpy_seed(seed):
            scores = metric(model=model, x_batch=x_np, y_batch=target, a_batch=None,
                            explain_func=explain, channel_first=True, device=device,
                            batch_size=batch_size)
        out[name] = np.asarray(scores, dtype=float).reshape(-1)
    df = pd.DataFrame(out, index=pd.RangeIndex(len(target), name="image"))
    df.attrs.update({"method": explain.__name__.removeprefix("robattr_"),
                     "quantus": getattr(quantus, "__version__", "?"),
                     "nr_samples": nr_samples if nr_samples is not None else "Quantus default"})
    return df
