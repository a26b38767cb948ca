"""How fast Integrated Gradients' completeness error falls with its steps, per quadrature
rule and per kind of network (the exercise of ``example/attribution_methods``).

* :func:`ig_test_models`: the page's ReLU model, its Softplus copy and random Softplus MLPs;
* :func:`ig_completeness_error`, :func:`ig_error_table`: the relative completeness error;
* :func:`ig_expected_slope`, :func:`ig_fitted_slope`, :func:`slope_text`,
  :func:`ig_slope_table`, :func:`ig_slope_answer`: the log-log rate against the one
  quadrature theory expects.
"""
from __future__ import annotations

import copy
import inspect
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr import attributions as A
from robattr.models import not_twice_differentiable, random_mlp

__all__ = ["ROUNDING", "ig_test_models", "default_ig_rule", "smoothness_line",
           "ig_completeness_error", "ig_error_table", "ig_expected_slope", "ig_fitted_slope",
           "slope_text", "ig_slope_table", "ig_slope_answer"]

#: relative errors below this are float64 rounding, not quadrature
ROUNDING = 1e-12


def ig_test_models(model: nn.Module, smooth: nn.Module, arch: str, x: torch.Tensor,
                   seed: int, n_random: int = 2) -> dict:
    """The networks of the completeness exercise, in float64 and eval mode: copies of the
    trained ReLU ``model`` and of its Softplus(3) copy ``smooth``, then ``n_random`` random
    Softplus(3) MLPs (hidden widths 32, 32; drawn from ``numpy``'s generator seeded
    ``seed``) on the inputs of ``x``, on ``x``'s device."""
    rng = np.random.default_rng(seed)
    nets = {f"trained {arch}, ReLU": copy.deepcopy(model).double().eval(),
            f"same {arch}, Softplus(3)": copy.deepcopy(smooth).double().eval()}
    for i in range(n_random):
        nets[f"random Softplus(3) MLP {i + 1}"] = random_mlp(
            [x[0].numel(), 32, 32, 10], "softplus", 3.0, rng=rng, flatten=True).to(x.device)
    return nets


def default_ig_rule() -> str:
    """The quadrature rule ``robattr.attributions.integrated_gradients`` uses unless told."""
    return inspect.signature(A.integrated_gradients).parameters["method"].default


def smoothness_line(name: str, net: nn.Module) -> str:
    """``"<name>: twice differentiable"``, or what makes ``net`` not twice differentiable."""
    why = not_twice_differentiable(net)
    return f"{name}: {'not twice differentiable: ' + why if why else 'twice differentiable'}"


def ig_completeness_error(net: nn.Module, x: torch.Tensor, rule: str, steps: int) -> float:
    """Mean |sum of the IG map - (f_y(x) - f_y(0))| over the images of ``x``, over the mean
    |f_y(x) - f_y(0)| (``y``: the predicted class, zero baseline), with ``steps`` steps of
    the quadrature ``rule``."""
    with torch.no_grad():
        logits = net(x)
        y = logits.argmax(1, keepdim=True)
        change = (logits.gather(1, y) - net(torch.zeros_like(x)).gather(1, y))[:, 0]
    total = A.integrated_gradients(net, x, y[:, 0], steps=steps, method=rule).flatten(1).sum(1)
    return float((total - change).abs().mean() / change.abs().mean())


def ig_error_table(nets: dict, x: torch.Tensor, rules: Sequence[str],
                   steps: Sequence[int]) -> pd.DataFrame:
    """:func:`ig_completeness_error` for every network, rule and step count: columns
    ``model``, ``rule``, ``steps``, ``error`` and ``shown`` (the error clipped below at
    :data:`ROUNDING`, so that rounding-level errors are drawn at the floor)."""
    table = pd.DataFrame([dict(model=name, rule=rule, steps=m,
                               error=ig_completeness_error(net, x, rule, m))
                          for name, net in nets.items() for rule in rules for m in steps])
    table["shown"] = table.error.clip(lower=ROUNDING)
    return table


def ig_expected_slope(net: nn.Module, rule: str) -> float:
    """The log-log slope quadrature theory gives: -1 for every rule when the integrand jumps
    (the network is not twice differentiable); else -1 for left/right, -2 for
    midpoint/trapezoid and faster than any power of m (-inf) for Gauss-Legendre."""
    if not_twice_differentiable(net):
        return -1.0
    return {"left": -1.0, "right": -1.0, "midpoint": -2.0, "trapezoid": -2.0}.get(rule, -np.inf)


def ig_fitted_slope(errors: pd.DataFrame) -> float:
    """Least-squares slope of log error against log steps over the rows of ``errors``
    (columns ``steps``, ``error``) above :data:`ROUNDING`; -inf when fewer than two are left
    (the rule reached rounding within the first step counts)."""
    above = errors[errors.error > ROUNDING]
    if len(above) < 2:
        return -np.inf
    return float(np.polyfit(np.log(above.steps), np.log(above.error), 1)[0])


def slope_text(s: float, expected: bool = False) -> str:
    """A slope for the table: -inf is "faster" (expected) or "rounding" (reached float64
    rounding); else the slope to two decimals."""
    return ("faster" if expected else "rounding") if s == -np.inf else f"{s:.2f}"


def ig_slope_table(errors: pd.DataFrame, nets: dict) -> pd.DataFrame:
    """One row per (model, rule) of :func:`ig_error_table`'s ``errors``: ``agrees`` (the
    fitted slope is within 0.3 of the expected one, or below -3 where the expected one is
    -inf) and ``slope`` (the text "fitted (expected ...)")."""
    rows = []
    for (name, rule), g in errors.groupby(["model", "rule"], sort=False):
        fitted, expected = ig_fitted_slope(g), ig_expected_slope(nets[name], rule)
        agrees = fitted < -3 if expected == -np.inf else abs(fitted - expected) <= 0.3
        rows.append(dict(model=name, rule=rule, agrees=agrees,
                         slope=f"{slope_text(fitted)} (expected {slope_text(expected, True)})"))
    return pd.DataFrame(rows)


def ig_slope_answer(slopes: pd.DataFrame) -> str:
    """The exercise's answer from :func:`ig_slope_table`: whether every fitted slope is
    within 0.3 of its expected rate, or which are not."""
    off = slopes[~slopes.agrees]
    if off.empty:
        return "answer: every fitted slope is within 0.3 of the rate quadrature theory expects"
    return (f"answer: {len(off)} of {len(slopes)} fitted slopes are more than 0.3 from the "
            "expected rate: " + "; ".join(off.model + ", " + off.rule))
