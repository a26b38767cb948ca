"""The wangkong2025 chapter's (paper 002, Wang & Kong) shared steps for Tables 5-7.

Tables 5, 6 and 7 give 002's largest certified budgets on MNIST, CIFAR-10 and ImageNet. The
certified_eps notebook runs each block whose data are here (:func:`~robattr.chapters.wangkong2025.blocks.table567_runs`):

* :func:`block_inputs`: a block's evaluated inputs and its models (the zoo's, or ImageNet's
  pretrained standard ResNet-50);
* :func:`certified_budgets`: per input, model, radius and threshold, the certified budget of
  uniformly smoothed IG (002 Cor. 1, corrected and printed forms, empirical M);
* :func:`mean_budgets`: their means, shaped as the paper's tables (``T``, ``model``, ``r``);
* :func:`threshold_ratio_violations`: Corollary 1's ratio test input by input.
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import torch

from robattr.chapters.wangkong2025.inputs import model_device, test_inputs

__all__ = ["MODEL_LABELS", "block_inputs", "certified_budgets", "mean_budgets",
           "threshold_ratio_violations", "k_T"]

#: The training losses of the paper's rows (Tables 5-6: Standard, IG-NORM, IGR; Table 7: Standard).
MODEL_LABELS = {"ce": "Standard", "ig_norm": "IG-NORM", "igr": "IGR"}


def k_T(T, corrected: bool = True):
    """Corollary 1's factor: ``sqrt(1 - T²)`` (corrected) or ``sqrt(1/T² - 1)`` (printed)."""
    T = np.asarray(T, dtype=float)
    return np.sqrt(1 - T**2) if corrected else np.sqrt(1 / T**2 - 1)


def block_inputs(run: dict, specs: dict, *, n_eval: int, seed: int, device):
    """``(x, y, models)`` of one block (a :func:`~robattr.chapters.wangkong2025.blocks.table567_runs`
    run): ``n_eval`` inputs of its split drawn in a random order fixed by ``seed``, and the zoo
    models of ``specs`` (its ``{loss: spec}``,
    :func:`~robattr.chapters.wangkong2025.specs.block_specs`) by loss, or, for a block with a
    weights file (ImageNet), only the pretrained standard ResNet-50 under ``"ce"`` (Table 7's
    only row). ``x`` and ``y`` are on the models' device."""
    from robattr import data, zoo
    from robattr.blocks import pretrained

    name = run["dataset"]
    size = run.get("size") if name not in data.DATASETS or name == "flowers102" else None
    x, y = test_inputs(name, n_eval, seed, split=run.get("split", "test"), size=size)
    if run.get("weights"):
        models = {"ce": pretrained("resnet50", name, run["weights"], device=device)}
    else:
        models = zoo.get_models(specs, device=device, progress=False)
    x = x.to(model_device(models))
    return x, y.to(x.device), models


def certified_budgets(models: dict, x: torch.Tensor, y: torch.Tensor, *, radii, thresholds,
                      n_samples: int, ig_steps: int, seed: int) -> pd.DataFrame:
    """Per input (``sample``), model, radius ``r``, threshold ``T`` and form (``corrected``,
    ``printed``): the certified budget ``eps_max`` of uniformly smoothed IG
    (:func:`robattr.bounds.ball_smoothing_max_eps`), with ``c = ‖h(x)‖₂`` from ``n_samples``
    draws (:func:`robattr.bounds.ball_smoothing_stats`, IG with ``ig_steps`` points) and the
    empirical M (the largest ``‖g‖₂`` of the draws; c is capped at M). ``model`` holds the
    paper's row names (:data:`MODEL_LABELS`), ``T`` is a string as in the paper's tables."""
    from robattr.attributions import integrated_gradients
    from robattr.bounds import ball_smoothing_max_eps, ball_smoothing_stats

    base = functools.partial(integrated_gradients, steps=ig_steps)
    d = x[0].numel()
    rows = []
    for m, model in models.items():
        for r in radii:
            st = ball_smoothing_stats(model, x, y, r=r, n_samples=n_samples, base=base, seed=seed)
            c = st["h"].flatten(1).norm(dim=1).cpu().numpy()
            M = st["g_max"].cpu().numpy().astype(float)
            for T in thresholds:
                for corrected in (True, False):
                    e = ball_smoothing_max_eps(np.minimum(c, M), M, d, r, T, corrected=corrected)
                    rows += [dict(model=MODEL_LABELS.get(m, m), r=float(r), sample=i, T=str(T),
                                  form="corrected" if corrected else "printed", eps_max=float(v))
                             for i, v in enumerate(np.atleast_1d(e))]
    return pd.DataFrame(rows)


def mean_budgets(budgets: pd.DataFrame, form: str = "corrected") -> pd.DataFrame:
    """The mean over the inputs of :func:`certified_budgets` in one ``form``, with the paper's
    columns: ``T``, ``model``, ``r`` (``"0.5"``...) and ``value``."""
    sub = budgets[budgets.form == form]
    out = sub.groupby(["T", "model", "r"], as_index=False)["eps_max"].mean()
    out["r"] = out["r"].map(lambda v: f"{v:.1f}")
    return out.rename(columns={"eps_max": "value"})


def threshold_ratio_violations(budgets: pd.DataFrame, lo: float, hi: float):
    """Corollary 1 implies ``eps(T = lo) / eps(T = hi) >= k_lo / k_hi`` (corrected form) for
    every input. Over the inputs of ``budgets`` whose ``hi`` budget is finite: ``(violations,
    cases, smallest ratio, lambda)``."""
    lam = float(k_T(lo) / k_T(hi))
    sub = budgets[budgets.form == "corrected"]
    per = sub.pivot_table(index=["model", "r", "sample"], columns="T", values="eps_max")
    hi_T, lo_T = per[str(hi)], per[str(lo)]
    finite = np.isfinite(hi_T)
    ratio = lo_T[finite] / hi_T[finite]
    return int((ratio < lam * (1 - 1e-9)).sum()), int(finite.sum()), float(ratio.min()), lam
