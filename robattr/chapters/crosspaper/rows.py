"""The rows of the cross-paper matrix: the training methods, their zoo models and their cost.

* :func:`training_rows`, :data:`BASELINE_ROWS`, :func:`not_run_rows`: every row, its zoo
  method and hyper-parameters and the papers that train or evaluate it;
* :func:`load_row_models`: the rows' zoo models (and ATEX's teacher);
* :func:`set_matrix_scale`, :func:`print_citations`, :func:`at_l2_against_madry`: the
  notebook's scale line, the papers' citations, the AT-l2 radius beside wang2020's;
* :func:`cost_table`, :func:`unrecorded_columns`, :func:`show_cost_table`, :func:`cost_against_joo2023`,
  :func:`cost_against_wang2020`, :func:`joo2023_time_ratios`, :func:`too_few_rounds`:
  the controlled and recorded training cost, set beside the papers' tables;
* :func:`test_subset`: the seeded test images every model is scored on.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr import data, timing, zoo
from robattr.report import papers, verdicts, viz
from robattr.chapters.crosspaper.matrix import training_cost
from robattr.chapters.crosspaper.specs import BASELINE_ROWS, TEACHER, row_methods

__all__ = ["training_rows", "BASELINE_ROWS", "not_run_rows", "load_row_models", "PAPERS",
           "set_matrix_scale", "print_citations", "at_l2_against_madry", "NOT_RECORDED",
           "cost_table", "unrecorded_columns", "COST_WORDS", "show_cost_table",
           "cost_against_joo2023", "cost_against_wang2020",
           "joo2023_time_ratios", "joo2023_cost_text", "wang2020_cost_text", "too_few_rounds",
           "test_subset"]

#: the five papers by chapter key, in the book's order
PAPERS = ("wang2020", "wangkong2023", "wangkong2025", "joo2023", "lim2021")
#: why a cost cell is empty
NOT_RECORDED = "not recorded: the zoo kept no such record when this model was trained"


#: the papers that train or evaluate each row of :func:`training_rows`
_SOURCES = {"CE": "-", "AT-linf": "wang2020, wangkong2023",
            "AT-l2": "wang2020 (at a larger radius)", "TRADES": "wangkong2023, wangkong2025",
            "IG-NORM": "wang2020, wangkong2023, wangkong2025", "IGR": "wangkong2025",
            "SSR": "wang2020", "Hessian": "joo2023", "l2": "joo2023", "l2+cosd": "joo2023",
            "ATEX": "joo2023 (a baseline)",
            "IGA / ART": "joo2023 (IGA, a baseline), wangkong2023 (ART)",
            "AdvAAT": "wangkong2023"}


def training_rows(at_l2_eps: float) -> dict:
    """Every row the matrix can have: ``{row: (zoo method, its hyper-parameters (each loss's
    defaults otherwise), the papers that train or evaluate it)}``, the methods of
    :func:`~robattr.chapters.crosspaper.specs.row_methods`. ``at_l2_eps`` is the ℓ2
    radius (pixel units) of the row AT-l2 (7-step ℓ2 PGD training, step a quarter of it).
    ATEX's teacher, the CE model's zoo key, is set by
    :func:`~robattr.chapters.crosspaper.specs.matrix`."""
    return {row: (method, hp, _SOURCES[row])
            for row, (method, hp) in row_methods(at_l2_eps).items()}


def not_run_rows(baselines: Sequence[str]) -> dict:
    """``{row: viz.NOT_RUN}`` for each baseline of :data:`BASELINE_ROWS` not in
    ``baselines`` (its row of the tables shows "—" with the reason)."""
    unknown = sorted(set(baselines) - set(BASELINE_ROWS))
    if unknown:
        raise ValueError(f"unknown baselines {unknown}; known: {list(BASELINE_ROWS)}")
    return {row: viz.NOT_RUN for b, row in BASELINE_ROWS.items() if b not in baselines}


def load_row_models(specs: dict, **shared) -> tuple[dict, dict]:
    """The zoo model of each row of ``specs`` (``row -> spec``, what
    :func:`~robattr.chapters.crosspaper.specs.matrix` returns), through
    :func:`robattr.zoo.get_models` with the ``shared`` keyword arguments (``device``,
    ``progress``). ATEX's teacher, the CE model of the same settings, is the row CE or,
    when CE is not a row, the spec labelled :data:`~robattr.chapters.crosspaper.specs.
    TEACHER`. Returns ``(models, teachers)``, both ``{row: model}`` (``teachers``:
    ``{"CE": model}`` when ATEX is a row, else empty)."""
    models = zoo.get_models(specs, **shared)
    teachers = {}
    if TEACHER in models:
        teachers["CE"] = models.pop(TEACHER)
    elif any(spec.get("method") == "atex" for spec in specs.values()):
        teachers["CE"] = models["CE"]
    return models, teachers


def set_matrix_scale(dataset: str, arch_label: str, beta: float, n_eval: int,
                     models: Iterable[nn.Module] | None = None,
                     what: str = "one per training method") -> None:
    """The scale line of the claims that follow (``robattr.report.verdicts.set_scale``): the
    dataset, ``"<arch_label> with Softplus(<beta>), <what>"``, ``n_eval`` test images per
    model and, when given, the models the claims rest on (their accuracy is checked)."""
    kw = {} if models is None else {"models": list(models)}
    verdicts.set_scale(dataset, f"{arch_label} with Softplus({beta:g}), {what}", n_eval,
                       unit="test images per model", **kw)


def print_citations() -> None:
    """Print the five papers' citations, one line each, by chapter key."""
    for key in PAPERS:
        print(f"{key}: {papers.CITATIONS[key]}")


def at_l2_against_madry(at_l2_eps: float) -> str:
    """A line that sets the AT-l2 row's ℓ2 radius (pixel units) beside wang2020's Madry
    radius, which its Table 3 states on the 0-255 scale."""
    madry = papers.table("wang2020_table3").query("training == 'Madry'").training_param.iloc[0]
    madry_eps = float(madry.split("=")[1]) / 255   # from the 0-255 scale to pixel units
    return (f"AT-l2: l2 radius {at_l2_eps:g} (pixel units); wang2020's Madry model: {madry} on "
            f"the 0-255 scale, {madry_eps:.3g} in pixel units; AT-l2's ball is "
            f"{at_l2_eps / madry_eps:.0f} times larger")


def _hparams_text(loss: dict, names: dict[str, str] | None = None) -> str:
    """A loss's hyper-parameters as ``a=1, b=x``; a value that is another model's zoo key
    (ATEX's ``teacher``) is named by its row in ``names`` (``{zoo key: row}``), else "a zoo
    model": a 64-character hash is no hyper-parameter a reader can read."""
    names = names or {}

    def value(b):
        if isinstance(b, float):
            return f"{b:.4g}"
        if isinstance(b, str) and len(b) == 64 and all(c in "0123456789abcdef" for c in b):
            return f"the {names[b]} model" if b in names else "a zoo model"
        return str(b)
    return ", ".join(f"{a}={value(b)}" for a, b in loss.items())


def cost_table(models: dict, rows: dict, step_times: dict) -> pd.DataFrame:
    """One row per model: its zoo method, source and hyper-parameters, the recorded cost of
    :func:`~robattr.chapters.crosspaper.training_cost`, ``step_seconds`` (the median of its
    controlled step times, ``step_times[row]``) and the step time and peak memory relative
    to the row CE (``step_vs_CE``, ``memory_vs_CE``; relative to the first row when CE is
    not one)."""
    if not models:
        raise ValueError("models must not be empty")
    out = []
    keys = {m.zoo_meta["key"]: name for name, m in models.items()
            if isinstance(getattr(m, "zoo_meta", None), dict) and "key" in m.zoo_meta}
    for name, m in models.items():
        c = training_cost(m)
        c["step_seconds"] = float(np.median(step_times[name]))
        out.append(dict(row=name, method=rows[name][0], source=rows[name][2],
                        hparams=_hparams_text(m.zoo_meta["config"]["loss"], keys), **c))
    cost = pd.DataFrame(out).set_index("row")
    ref = "CE" if "CE" in cost.index else cost.index[0]
    cost["step_vs_CE"] = cost.step_seconds / cost.loc[ref, "step_seconds"]
    cost["memory_vs_CE"] = cost.peak_memory_mb / cost.loc[ref, "peak_memory_mb"]
    return cost


def unrecorded_columns(cost: pd.DataFrame) -> list[str]:
    """The recorded-cost columns of :func:`cost_table` with a gap (a model trained before
    the zoo kept that record)."""
    return [c for c in ("test_acc", "seconds_per_epoch", "cpu_seconds_per_epoch",
                        "train_seconds", "peak_memory_mb", "memory_vs_CE")
            if c in cost and cost[c].isna().any()]


#: :func:`cost_table`'s columns as the page names them, in two tables: what was trained,
#: and what its training cost (per epoch in wall seconds, which count what else ran, and in
#: the process's CPU seconds, which do not; the whole training time is their product with
#: the epochs, left out so that the table fits the page)
COST_WORDS = ({"method": "zoo method", "source": "trained or evaluated in",
               "hparams": "hyper-parameters", "test_acc": "test accuracy"},
              {"seconds_per_epoch": "wall seconds per epoch",
               "cpu_seconds_per_epoch": "CPU seconds per epoch",
               "peak_memory_mb": "peak memory (MB)", "step_seconds": "one step (s)",
               "step_vs_CE": "step time (× CE)", "memory_vs_CE": "peak memory (× CE)"})


def show_cost_table(cost: pd.DataFrame, not_run: dict[str, str], digits: int = 4) -> None:
    """:func:`cost_table` shown as two tables that fit the page, columns named in words
    (:data:`COST_WORDS`): the trained models (method, source, hyper-parameters, accuracy),
    then their cost; ``not_run`` (row -> reason) adds the rows not trained, shown "—"."""
    whole = cost.reindex([*cost.index, *not_run]).round(digits)
    whole.index.name = "row"
    gaps = {c: NOT_RECORDED for c in unrecorded_columns(cost)}
    for words, caption in zip(COST_WORDS, ("The trained models", "What each training cost "
                                           "(one step: the median of the controlled rounds)")):
        part = whole[list(words)].rename(columns=words)
        why = {**not_run, **{words[c]: r for c, r in gaps.items() if c in words}}
        with pd.option_context("display.max_colwidth", None):   # the hyper-parameters whole
            viz.show_table(part, why=why, caption=caption)


def cost_against_joo2023(cost: pd.DataFrame, dataset: str, arch: str) -> pd.DataFrame:
    """The controlled time and the peak memory of the rows Hessian and l2+cosd relative to
    CE, beside joo2023's Table 2 (CIFAR-10 LeNet, ``robattr.report.papers.compare``): one row per
    (regulariser, resource); the ours column is empty when CE or the row is missing."""
    rel = []
    for reg, row in (("Hessian", "Hessian"), ("l2+Cosd", "l2+cosd")):
        if row in cost.index and "CE" in cost.index:
            rel += [dict(regularizer=reg, resource="time", value=cost.loc[row, "step_vs_CE"]),
                    dict(regularizer=reg, resource="memory", value=cost.loc[row, "memory_vs_CE"])]
    rel = pd.DataFrame(rel, columns=["regularizer", "resource", "value"])
    cmp2 = papers.compare(rel, "joo2023_table2", on=["regularizer", "resource"],
                          where={"dataset": "CIFAR10", "model": "LeNet"},
                          ours_label=f"ours ({dataset} {arch}, x CE)",
                          paper_label="paper (CIFAR10 LeNet, x CE)")
    shown = cmp2[cmp2.regularizer.isin(["Hessian", "l2+Cosd"])]
    shown = shown.set_index(shown.regularizer + ", " + shown.resource)
    shown = shown.drop(columns=["regularizer", "resource"])
    return shown.drop(columns=[c for c in ("note",)
                               if c in shown and not shown[c].astype(str).str.strip().any()])


def cost_against_wang2020(cost: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The controlled step time of SSR, AT-l2 and IG-NORM relative to AT-l2 (our stand-in for
    wang2020's Madry row: the radius does not change a step's cost), beside wang2020's Table 3
    hours per epoch relative to Madry. Returns ``(table, paper)``: the table (``training``,
    ``value``, ``paper (h/epoch, x Madry)``; empty without AT-l2) and the paper's hours per
    epoch by training."""
    t3 = []
    if "AT-l2" in cost.index:
        for train, row in (("SSR", "SSR"), ("Madry", "AT-l2"), ("IG-NORM", "IG-NORM")):
            if row in cost.index:
                t3.append(dict(training=train, value=cost.loc[row, "step_seconds"]
                               / cost.loc["AT-l2", "step_seconds"]))
    t3 = pd.DataFrame(t3, columns=["training", "value"])
    p3 = papers.table("wang2020_table3")
    p3 = p3[p3.metric == "time_per_epoch_h"].set_index("training")["value"]
    t3["paper (h/epoch, x Madry)"] = t3.training.map(p3 / p3["Madry"])
    return t3, p3


def joo2023_time_ratios() -> pd.Series:
    """joo2023's Table 2: training time relative to CE by regulariser (CIFAR-10 LeNet)."""
    p2 = papers.table("joo2023_table2")
    p2 = p2[(p2.dataset == "CIFAR10") & (p2.model == "LeNet") & (p2.resource == "time")]
    return p2.set_index("regularizer").value


def joo2023_cost_text(cost: pd.DataFrame, ce_ref: str = "CE") -> str:
    """The measured side of joo2023's cost claim: the median step of the rows l2+cosd,
    Hessian and ``ce_ref`` in ms, beside joo2023's Table 2 times per epoch relative to CE."""
    p2 = joo2023_time_ratios()
    h, lc = cost.loc["Hessian", "step_seconds"], cost.loc["l2+cosd", "step_seconds"]
    return (f"Median step on 64 digits: l2+cosd {lc * 1e3:.0f} ms, Hessian {h * 1e3:.0f} ms "
            f"(CE {cost.loc[ce_ref, 'step_seconds'] * 1e3:.0f} ms); the paper's time per epoch, "
            f"x CE: Hessian {p2['Hessian']:.2f}, l2+Cosd {p2['l2+Cosd']:.2f} (CIFAR-10 LeNet).")


def wang2020_cost_text(t3: pd.DataFrame, p3: pd.Series) -> str:
    """The measured side of wang2020's cost claims, from :func:`cost_against_wang2020`: the
    median step of SSR and IG-NORM relative to AT-l2, beside the paper's hours per epoch
    relative to Madry."""
    s, i = (t3.set_index("training").value[t] for t in ("SSR", "IG-NORM"))
    return (f"Median step time relative to l2 AT: SSR {s:.2f}, IG-NORM {i:.2f} (paper, per epoch "
            f"on CIFAR-10: SSR {p3['SSR'] / p3['Madry']:.2f}, "
            f"IG-NORM {p3['IG-NORM'] / p3['Madry']:.2f}).")


def too_few_rounds(what: str, measured: str, rounds: int) -> str:
    """The cost measurement without a verdict: ``rounds`` timing rounds, fewer than
    ``robattr.timing.MIN_TIMING_ROUNDS``, give no interval."""
    return (f"{what}: {rounds} timing rounds, fewer than {timing.MIN_TIMING_ROUNDS}, give no "
            f"interval, so no verdict. Measured: {measured}")


def test_subset(dataset: str, n: int, seed: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` test images of ``dataset`` and their labels, drawn by a permutation seeded
    ``seed`` (the same images for every model), on ``device``."""
    x, y = data.as_tensors(data.load(dataset, split="test"), None)
    if not 1 <= n <= len(x):
        raise ValueError(f"n must be in [1, {len(x)}], got {n!r}")
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))[:n]
    return x[idx].to(device), y[idx].to(device)
