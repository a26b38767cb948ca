"""The cross-paper matrix: every model under the five papers' evaluations, and what it says.

* :data:`EVALUATIONS` (the five evaluations of :mod:`.evaluations` by chapter key) and
  :func:`evaluate_all`: one model under every evaluation, one row of the matrix;
* :func:`headline_per_image`: a headline's per-image values (:data:`PER_IMAGE_HEADLINES`),
  for verdicts over images;
* :func:`higher_is_better`: which way each key is "more robust" (used to rank models);
* :func:`training_cost`: a zoo model's accuracy and training cost, from ``model.zoo_meta``;
* :func:`defenses_against_reference` (each paper's defenses against standard training),
  :func:`learned_rows` (the models that learned their task) and :func:`pareto_front`
  (robustness against cost). The agreement of two evaluations is
  :func:`robattr.report.verdicts.rank_agreement` (a bootstrap that recomputes Spearman's ρ).

The claims about training time rest on :mod:`robattr.timing`, which the joo2023 chapter
shares.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np
import torch
from torch import nn

from robattr.attack_protocol import attack_eval_wang2020, auc_wang2020
from robattr.chapters.crosspaper.evaluations import (
    _base_wangkong2025, _certified_eps_per_image, _eps_list, _gen, _k, _methods_wang2020, _methods_joo2023, _positive,
    _target, _unit, attack_auc_wang2020, certified_eps_wangkong2025, deviation_bounds_wangkong2023, interpretation_joo2023,
    retrieval_lim2021)
from robattr.utils import check_image_batch, check_int, check_model

__all__ = ["training_cost", "higher_is_better", "EVALUATIONS", "PER_IMAGE_HEADLINES",
           "evaluate_all", "headline_per_image", "defenses_against_reference",
           "learned_rows", "pareto_front"]


# --------------------------------------------------------------------------- cost
def training_cost(model: nn.Module) -> dict:
    """Accuracy and training cost of a zoo model, from ``model.zoo_meta``:
    ``test_acc``, ``seconds_per_epoch`` (wall seconds, mean over epochs: they count whatever
    else the machine ran), ``cpu_seconds_per_epoch`` (the training process's CPU seconds,
    which other processes do not inflate), ``train_seconds`` (the whole training) and
    ``peak_memory_mb`` (the trainer's peak: CUDA's allocator on a GPU, autograd's saved
    activations + parameters/gradients/optimizer state on the CPU); NaN where the zoo did
    not record it (a model trained before it kept that record)."""
    meta = getattr(model, "zoo_meta", None)
    if not isinstance(meta, dict):
        raise ValueError("model has no zoo_meta: training_cost needs a model from "
                         "robattr.zoo.get_model")
    spe = meta.get("seconds_per_epoch")
    if isinstance(spe, (list, tuple)):
        spe = float(np.mean(spe)) if spe else float("nan")
    peak, cpu = meta.get("peak_memory_bytes"), meta.get("cpu_seconds_per_epoch")
    return {"test_acc": float(meta.get("test_acc", float("nan"))),
            "seconds_per_epoch": float(spe) if spe is not None else float("nan"),
            "cpu_seconds_per_epoch": float(cpu) if cpu is not None else float("nan"),
            "train_seconds": float(meta.get("train_seconds", float("nan"))),
            "peak_memory_mb": float(peak) / 2 ** 20 if peak is not None else float("nan")}



# --------------------------------------------------------------------------- directions
_LOWER = ("T_e_", "T_c_deg_", "dev_", "angle_deg_", "frac_above_Te_", "fooled",
          "seconds_per_epoch", "cpu_seconds_per_epoch", "train_seconds", "step_seconds",
          "peak_memory_mb", "cert_violations")
#: Quantus's four robustness metrics (robattr.metrics.quantus_adapter.ROBUSTNESS_METRICS, by
#: Quantus's own names): sensitivities and Lipschitz ratios, lower = more robust.
_QUANTUS_LOWER = ("Max-Sensitivity", "Avg-Sensitivity", "Local Lipschitz Estimate",
                  "Relative Input Stability")


def higher_is_better(key: str) -> bool:
    """Whether a larger value of an evaluation key means a more robust (or cheaper, or more
    accurate) model: False for bounds, deviations, angles, attack success, costs and
    Quantus's four robustness metrics (Max-Sensitivity, Avg-Sensitivity, Local Lipschitz
    Estimate, Relative Input Stability), True for agreement scores, certified budgets, cosines, retrieval, R and accuracy.
    (000's ``kin_auc_clean_*`` is a no-attack reference, not a robustness score: it says
    how concentrated the clean maps are; compare ``kin_auc_*`` with it rather than rank it.)"""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string, got {key!r}")
    return not (key.startswith(_LOWER) or key in _QUANTUS_LOWER)


#: The five papers' evaluations by chapter key.
EVALUATIONS = {
    "wang2020": attack_auc_wang2020,
    "wangkong2023": deviation_bounds_wangkong2023,
    "wangkong2025": certified_eps_wangkong2025,
    "joo2023": interpretation_joo2023,
    "lim2021": retrieval_lim2021,
}


# --------------------------------------------------------------------------- the matrix
#: The headline of each paper whose per-image values :func:`headline_per_image` returns
#: (the batch mean of those values is the evaluation's cell).
PER_IMAGE_HEADLINES = {"wang2020": "kin_auc_SM", "wangkong2025": "eps_cert_mean",
                       "joo2023": "rps_Grad"}


def _paper_kwargs(paper, kwargs) -> dict:
    """The keyword arguments of ``EVALUATIONS[paper]``: its defaults updated by ``kwargs``
    (a name the evaluation does not take is a ValueError)."""
    import inspect

    fn = EVALUATIONS[paper]
    params = {n: p.default for n, p in inspect.signature(fn).parameters.items()
              if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ValueError(f"{fn.__name__} takes no argument {unknown}; it takes {sorted(params)}")
    return {**params, **kwargs}


def evaluate_all(model: nn.Module, x: torch.Tensor, y=None, kwargs: dict | None = None
                 ) -> tuple[dict, dict]:
    """Every paper's evaluation of :data:`EVALUATIONS` on one model and batch, in that
    order: ``kwargs`` maps a paper key to the keyword arguments of its evaluation (a
    paper left out runs with the defaults). Returns ``(cells, seconds)``: ``cells`` maps
    ``(paper, key)`` to each returned scalar, ``seconds`` maps each paper to the wall-clock
    seconds of its call. One row of the cross-paper matrix."""
    import time

    kwargs = {} if kwargs is None else dict(kwargs)
    unknown = sorted(set(kwargs) - set(EVALUATIONS))
    if unknown:
        raise ValueError(f"kwargs has keys that are not papers: {unknown} (papers: "
                         f"{list(EVALUATIONS)})")
    cells, seconds = {}, {}
    for paper, fn in EVALUATIONS.items():
        t0 = time.perf_counter()
        out = fn(model, x, y, **kwargs.get(paper, {}))
        cells.update({(paper, key): v for key, v in out.items()})
        seconds[paper] = time.perf_counter() - t0
    return cells, seconds


def headline_per_image(paper: str, model: nn.Module, x: torch.Tensor, y=None,
                       **kwargs) -> np.ndarray:
    """The per-image values whose mean is the headline cell :data:`PER_IMAGE_HEADLINES`
    ``[paper]`` of ``EVALUATIONS[paper](model, x, y, **kwargs)``, computed by the same
    calls with the same seeds: 000's mass-form k-in AUC of SM under the top-k attack,
    002's corrected certified ℓ2 budget, 003's RPS of the gradient. ``kwargs`` are the
    evaluation's own keyword arguments (those the headline does not use are accepted and
    ignored, so one dict serves both calls). Returns N floats (float64), one per image."""
    if paper not in PER_IMAGE_HEADLINES:
        raise ValueError(f"paper must be one of {list(PER_IMAGE_HEADLINES)}, got {paper!r}")
    kw = _paper_kwargs(paper, kwargs)
    model = check_model(model)
    x, y = check_image_batch(x, y)
    seed = check_int("seed", kw["seed"], 0)
    y = _target(model, x, y)
    if paper == "joo2023":
        from robattr.metrics import rps

        v = rps(model, _methods_joo2023()["Grad"], x, y, eps=_positive("rps_eps", kw["rps_eps"]),
                n_samples=check_int("rps_samples", kw["rps_samples"]), generator=_gen(x, seed))
    elif paper == "wangkong2025":
        T = kw["T"]
        if isinstance(T, bool) or not isinstance(T, numbers.Real) or not 0 < T < 1:
            raise ValueError(f"T must be a number in (0, 1), got {T!r}")
        unit = _unit(_base_wangkong2025(kw["base"], check_int("ig_steps", kw["ig_steps"])))
        v, _ = _certified_eps_per_image(model, x, y, unit, r=_positive("r", kw["r"]), T=T,
                                        n_samples=check_int("n_samples", kw["n_samples"], 2),
                                        seed=seed)
    else:
        table = _methods_wang2020(check_int("ig_steps", kw["ig_steps"]),
                             check_int("n_samples", kw["n_samples"]), kw["sg_noise"],
                             kw["ug_radius"], kw["multiply_by_input"])
        curves = attack_eval_wang2020(model, x, attack="topk", method="SM",
                                 eps_list=_eps_list(kw["eps_list"]), k=_k(kw["k"], x),
                                 steps=check_int("steps", kw["steps"]), step_size=kw["step_size"],
                                 surrogate_beta=kw["surrogate_beta"], methods=table, seed=seed,
                                 target=y, per_image=True)
        v = auc_wang2020(curves[curves.metric == "k-in"], by="image").sort_values("image").value
    v = v.detach().cpu() if torch.is_tensor(v) else v
    return np.asarray(v, dtype=np.float64).reshape(-1)


def defenses_against_reference(matrix, defenses: dict, headlines: Sequence,
                               reference: str = "CE"):
    """Each paper's own claim, read off the matrix: do the defenses it evaluates beat the
    ``reference`` row (standard training) on its headline, and on how many of the other
    papers' headlines?

    ``matrix`` is a DataFrame with one row per training method and ``(paper, key)``
    columns; ``defenses`` maps a paper to ``(its defense rows, its headline column)``;
    ``headlines`` lists the headline columns of all papers (those of the same paper are
    skipped when counting the others). Directions come from :func:`higher_is_better`.
    A paper is left out when ``reference`` or all its defenses are missing from the
    matrix. Returns a DataFrame with one row per (paper, defense): ``paper``,
    ``defense``, ``headline`` (its key), ``<reference>`` and ``defense_value`` (the two
    headline cells), ``beats_<reference>`` (strictly better) and
    ``beats_<reference>_on_other_headlines`` (``"i of n"``)."""
    import pandas as pd

    if not isinstance(matrix, pd.DataFrame) or matrix.columns.nlevels != 2:
        raise ValueError("matrix must be a DataFrame with (paper, key) columns")
    if not isinstance(defenses, dict):
        raise ValueError(f"defenses must map a paper to (rows, headline column), got "
                         f"{type(defenses).__name__}")
    headlines = [tuple(c) for c in headlines]
    for col in headlines + [tuple(v[1]) for v in defenses.values()]:
        if col not in matrix.columns:
            raise ValueError(f"column {col!r} is not in the matrix")
    beats = f"beats_{reference}"
    rows = []
    for paper, (defs, col) in defenses.items():
        defs = [d for d in defs if d in matrix.index]
        if reference not in matrix.index or not defs:
            continue
        s = 1.0 if higher_is_better(col[1]) else -1.0
        ref_v = float(matrix.loc[reference, col])
        others = [c for c in headlines if c[0] != paper]
        for d in defs:
            own = float(matrix.loc[d, col])
            wins = sum(float(np.sign((matrix.loc[d, c] - matrix.loc[reference, c]) *
                                     (1 if higher_is_better(c[1]) else -1))) > 0 for c in others)
            rows.append({"paper": paper, "defense": d, "headline": col[1], reference: ref_v,
                         "defense_value": own, beats: bool(s * (own - ref_v) > 0),
                         f"{beats}_on_other_headlines": f"{int(wins)} of {len(others)}"})
    return pd.DataFrame(rows)


def learned_rows(test_acc, min_acc: float, *, at_least: int = 2) -> tuple[list, list]:
    """Split the rows of a comparison by clean test accuracy: ``(kept, dropped)``, the rows
    with ``test_acc >= min_acc`` and those below it, each in the input's order.

    A model that did not learn its task (a collapsed one predicts a single class) can look
    robust because its maps barely depend on the input, so it is no evidence for or
    against a defense. ``test_acc`` maps a row name to its accuracy (a dict or a Series).
    Raises ``ValueError`` when fewer than ``at_least`` rows are kept (nothing left to rank),
    naming the rows and their accuracies."""
    if not 0 <= min_acc < 1:
        raise ValueError(f"min_acc must be in [0, 1), got {min_acc!r}")
    if isinstance(at_least, bool) or int(at_least) != at_least or at_least < 0:
        raise ValueError(f"at_least must be an integer >= 0, got {at_least!r}")
    acc = {str(k): float(v) for k, v in dict(test_acc).items()}
    if any(not 0 <= v <= 1 for v in acc.values()):
        raise ValueError(f"test accuracies must be in [0, 1], got {acc}")
    kept = [k for k, v in acc.items() if v >= min_acc]
    dropped = [k for k in acc if k not in kept]
    if len(kept) < at_least:
        listing = ", ".join(f"{k} {v:.3f}" for k, v in acc.items())
        raise ValueError(f"only {len(kept)} of {len(acc)} rows reach the clean test accuracy "
                         f"{min_acc} ({listing}); at least {at_least} are needed: lower min_acc "
                         "or train the models longer")
    return kept, dropped


def pareto_front(score, cost) -> list:
    """The rows that no other row beats on both ``score`` and ``cost`` (lower is better for
    both; a row beats another when it is no worse on both and better on one). ``score`` and
    ``cost`` are pandas Series over the same rows, without NaN. Returns the front's row
    labels in the order of ``score``'s index."""
    import pandas as pd

    if not isinstance(score, pd.Series) or not isinstance(cost, pd.Series):
        raise ValueError("score and cost must be pandas Series")
    if set(score.index) != set(cost.index) or score.index.has_duplicates:
        raise ValueError("score and cost must share one set of distinct row labels")
    if score.isna().any() or cost.isna().any():
        raise ValueError("score and cost must not hold NaN")
    return [r for r in score.index
            if not any(score[o] <= score[r] and cost[o] <= cost[r]
                       and (score[o] < score[r] or cost[o] < cost[r]) for o in score.index)]
