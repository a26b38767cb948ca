"""Table 1's cells and tables: the evaluation of every model and attribution, the tables of
ours beside the paper's, the appendix's RPS and Table 4, and the broken-maps check.

Every cell is computed with the same settings (:func:`cell_settings`, from the notebook's
parameters): RPS with its own seeded noise, Insertion, and the targeted frame attack behind
Adv-Insertion.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from robattr.attributions import grad, guided_backprop, input_x_grad, lrp

__all__ = ["METHODS", "METRICS", "cell_settings", "accuracy_rows", "evaluate", "side_by_side",
           "metric_table", "gap_reasons", "cell_value", "paper_values", "seed_table", "seeded_table",
           "seeded_cells", "appendix_rps", "table4_rows", "broken_maps", "attack_change",
           "rps_at"]

#: Table 1's four attribution methods, by their column names
METHODS = {"Grad": grad, "xGrad": input_x_grad, "GBP": guided_backprop, "LRP": lrp}
#: Table 1's metrics in its column order
METRICS = ("accuracy", "RPS", "Ins", "A-Ins")


def cell_settings(params: dict, target_map: torch.Tensor) -> dict:
    """The settings of every Table 1 cell, from the notebook's parameters (``run.params``):
    the keyword arguments of :func:`robattr.chapters.joo2023.compare.per_image_cells`
    (RPS noise and clamp of the protocol, the attack toward ``target_map``)."""
    from robattr.metrics import PROTOCOLS

    if params["protocol"] not in PROTOCOLS:
        raise ValueError(f"unknown protocol {params['protocol']!r}; known: {list(PROTOCOLS)}")
    return dict(rps_eps=params["rps_eps"], rps_samples=params["rps_samples"],
                clamp=PROTOCOLS[params["protocol"]]["rps_clamp"], seed=params["seed"],
                target_map=target_map, attack_eps=params["attack_eps"],
                attack_gamma=params["attack_gamma"], attack_steps=params["attack_steps"],
                protocol=params["protocol"])


def _generator(X: torch.Tensor, seed: int) -> torch.Generator:
    return torch.Generator(device=X.device).manual_seed(seed)


def accuracy_rows(models: dict, log=print, prefix: str = "") -> list[dict]:
    """Table 1's accuracy rows (the zoo's recorded test accuracy, in points), each printed."""
    rows = []
    for reg, m in models.items():
        acc = 100 * m.zoo_meta["test_acc"]
        rows.append(dict(regularizer=reg, attribution="", metric="accuracy", value=acc))
        log(f"{prefix}{reg:8s} test accuracy {acc:.1f} %")
    return rows


def evaluate(models: dict, X, Y, settings: dict, *, attack_eps: float | None = None):
    """Table 1's cells of every model in ``models`` and every attribution of :data:`METHODS`
    on ``(X, Y)``, with ``settings`` (:func:`cell_settings`; ``attack_eps`` replaces its
    budget). Returns ``(rows, per_img, curves, adv_x)``: the table's rows (means),
    ``(model, attribution, metric) -> per-image values``, ``(model, attribution) ->
    (insertion, adv-insertion)`` curves and ``(model, attribution, eps) -> attacked inputs``."""
    from robattr.attacks import targeted_attack
    from robattr.metrics import adv_insertion, insertion, rps

    s = settings
    eps = s["attack_eps"] if attack_eps is None else attack_eps
    rows, per_img, curves, adv_x = [], {}, {}, {}
    for reg, m in models.items():
        for name, fn in METHODS.items():
            r = rps(m, fn, X, Y, eps=s["rps_eps"], n_samples=s["rps_samples"], clamp=s["clamp"],
                    generator=_generator(X, s["seed"]))
            ins = insertion(m, X, fn(m, X, Y), Y, protocol=s["protocol"])
            res = targeted_attack(m, X, Y, target_map=s["target_map"], eps=eps, method=fn,
                                  gamma=s["attack_gamma"], steps=s["attack_steps"])
            ains = adv_insertion(m, fn, X, res.x_adv, Y, protocol=s["protocol"])
            curves[reg, name] = (ins, ains)
            adv_x[reg, name, eps] = res.x_adv
            per_img[reg, name, "RPS"] = r.double().cpu().numpy()
            per_img[reg, name, "Ins"] = 100 * ins.mean.double().cpu().numpy()
            per_img[reg, name, "A-Ins"] = 100 * ains.mean.double().cpu().numpy()
            rows += [dict(regularizer=reg, attribution=name, metric=metric,
                          value=float(per_mean)) for metric, per_mean in
                     (("RPS", r.mean()), ("Ins", 100 * float(ins.mean.mean())),
                      ("A-Ins", 100 * float(ains.mean.mean())))]
    return rows, per_img, curves, adv_x


def side_by_side(block: pd.DataFrame, column: str, keys, sources, order, *,
                 label: str = "{key} · {src}", dropna: bool = True) -> pd.DataFrame:
    """One row per regulariser (in ``order``), one column per ``(key of column, source)``:
    the long table ``block`` of :func:`robattr.report.papers.compare` made wide, each column named
    by ``label``."""
    cols = [(src, k) for k in keys for src in sources]
    wide = block.pivot_table(index="regularizer", columns=column, values=sources, aggfunc="first",
                             sort=False, dropna=dropna
                             ).reindex(index=order, columns=pd.MultiIndex.from_tuples(cols))
    wide.columns = [label.format(key=k, src=src) for src, k in cols]
    return wide


def metric_table(cmp: pd.DataFrame, attr: str, order, *, numeric: bool = False) -> pd.DataFrame:
    """Table 1's block of one attribution (``""``: accuracy), ours beside the paper's, one
    column per metric and source, RPS to 3 decimals and the rest to 1 (``numeric``: keep
    empty rows and read every column as numbers first)."""
    from robattr.report.references import value_columns

    block = cmp[cmp.attribution == attr]
    keys = [m for m in METRICS if m in set(block.metric)]
    wide = side_by_side(block, "metric", keys, value_columns(cmp), order, dropna=not numeric)
    if numeric:
        wide = wide.apply(pd.to_numeric, errors="coerce")
    return wide.round({c: 3 if c.startswith("RPS") else 1 for c in wide.columns})


#: the reason of a "—" by its column's source (the end of its label, after " · ")
def _source_reason(column: str) -> str:
    from robattr.report import viz

    reasons = {"ours": viz.NOT_RUN, "paper": viz.NOT_IN_PAPER}
    return reasons.get(column.split(" · ")[-1], "the kept reference run has no value here")


def gap_reasons(wide: pd.DataFrame, not_run: dict, *, paper_anywhere: bool = False) -> dict:
    """The reason of every "—" of a wide table: the rows of ``not_run`` (a model this tier
    does not train, with its reason), then any other gap by its column's source;
    ``paper_anywhere``: a paper column with a gap in any row, not-run rows included."""
    from robattr.report import viz

    run = wide.drop(index=list(not_run))
    why = {c: _source_reason(c) for c in wide.columns if run[c].isna().any()}
    out = {**not_run, **why}
    if paper_anywhere:
        out.update({c: viz.NOT_IN_PAPER for c in wide.columns
                    if c.endswith(" · paper") and wide[c].isna().any()})
    return out


def cell_value(ours: pd.DataFrame, reg: str, attr: str, metric: str) -> float:
    """Our value of one cell of Table 1 (``IndexError`` when the table has none)."""
    hit = ours[(ours.regularizer == reg) & (ours.attribution == attr) & (ours.metric == metric)]
    return float(hit.value.iloc[0])


def paper_values(cmp: pd.DataFrame, models, attr: str, metric: str) -> str:
    """The paper's values of one column for the regularisers trained here, as a phrase."""
    p = cmp[(cmp.attribution == attr) & (cmp.metric == metric) & cmp.regularizer.isin(list(models))]
    return ", ".join(f"{r.regularizer} {r.paper:.3g}" for r in p.itertuples() if pd.notna(r.paper))


def seed_table(seed_values: dict, spread: dict) -> pd.DataFrame:
    """One row per ``(attribution, metric)``: its value at each seed and the spread."""
    return pd.DataFrame({f"{a} {m}".strip(): {**{f"seed {s}": v for s, v in enumerate(vals)},
                                               "spread (sd)": spread[a, m]}
                         for (a, m), vals in seed_values.items()}).T


def seeded_table(per_seed: dict, n_seeds: int) -> pd.DataFrame:
    """One row per model and cell of :func:`seeded_cells`: its mean over the images at each
    seed."""
    return pd.DataFrame({" ".join(w for w in key if w): v.mean(1) for key, v in per_seed.items()},
                        index=[f"seed {s}" for s in range(n_seeds)]).T


def seeded_cells(models: dict, n_seeds: int, X, Y, X_all, Y_all, settings: dict) -> dict:
    """``(model, attribution, metric) -> seeds x images`` of the compared cells
    (:data:`~robattr.chapters.joo2023.seeds.SEED_CELLS`) of 003's four models, at seeds 0
    to ``n_seeds - 1``, taken from a notebook's ``{label: model}`` ``models``
    (:func:`~robattr.chapters.joo2023.models.seed_models`)."""
    from robattr.chapters.joo2023.compare import per_image_cells
    from robattr.chapters.joo2023.models import seed_models
    from robattr.chapters.joo2023.specs import BASELINES, REGULARIZERS

    per_seed = {}
    for reg in (r for r in REGULARIZERS if r not in BASELINES):
        cells = [per_image_cells(m, X, Y, METHODS, X_all=X_all, Y_all=Y_all, **settings)
                 for m in seed_models(models, reg, n_seeds)]
        for cell in cells[0]:
            per_seed[(reg, *cell)] = np.stack([c[cell] for c in cells])
    return per_seed


def appendix_rps(models: dict, X, Y, eps_list, settings: dict) -> pd.DataFrame:
    """The appendix's RPS with cosine, PCC and SSIM (of max-normalised maps, a window that
    fits the images) at each budget of ``eps_list``, for Grad and xGrad, with the same noise
    draws: rows ``(attribution, regularizer)``, columns ``(similarity, eps in /255)``."""
    from robattr.metrics import cosine_similarity, normalize_map, pearson, rps, ssim

    h = X.shape[-2]
    win = min(7, h - (1 - h % 2))
    sims = {"cosine": cosine_similarity, "PCC": pearson,
            "SSIM": lambda a, b: ssim(normalize_map(a, "max"), normalize_map(b, "max"),
                                      data_range=1.0, win_size=win)}
    rows = []
    for reg, m in models.items():
        for name in ("Grad", "xGrad"):
            for eps in eps_list:
                for sim, fn in sims.items():
                    v = rps(m, METHODS[name], X, Y, eps=eps, n_samples=settings["rps_samples"],
                            similarity=fn, clamp=settings["clamp"],
                            generator=_generator(X, settings["seed"]))
                    rows.append(dict(regularizer=reg, attribution=name, eps=round(eps * 255),
                                     similarity=sim, value=float(v.mean())))
    app = pd.DataFrame(rows).pivot_table(index=["attribution", "regularizer"],
                                         columns=["similarity", "eps"], values="value", sort=False)
    app.columns.names = ["similarity", "eps (/255)"]
    return app


def table4_rows(models: dict, names, eps_list, adv_x: dict, X, Y, settings: dict) -> list[dict]:
    """Appendix Table 4's rows: Adv-Insertion (points) of each attribution of ``names`` at
    each budget of ``eps_list``; attacks not in ``adv_x`` are run and added to it."""
    from robattr.attacks import targeted_attack
    from robattr.metrics import adv_insertion

    s, rows = settings, []
    for reg, m in models.items():
        for name in names:
            fn = METHODS[name]
            for eps in eps_list:
                key = (reg, name, eps)
                if key not in adv_x:
                    adv_x[key] = targeted_attack(m, X, Y, target_map=s["target_map"], eps=eps,
                                                 method=fn, gamma=s["attack_gamma"],
                                                 steps=s["attack_steps"]).x_adv
                ai = adv_insertion(m, fn, X, adv_x[key], Y, protocol=s["protocol"])
                rows.append(dict(regularizer=reg, attribution=name, eps=str(round(eps * 255)),
                                 metric="A-Ins", value=100 * float(ai.mean.mean())))
    return rows


def broken_maps(pair: dict, X, Y, settings: dict) -> tuple[pd.DataFrame, dict]:
    """Accuracy, Grad RPS and Grad Insertion of each model of ``pair`` (label -> model):
    the table (one row per label) and ``label -> (per-image RPS, per-image Insertion in
    points)``."""
    from robattr.metrics import insertion, rps

    s, rows, per_img = settings, [], {}
    for label, m in pair.items():
        r = rps(m, grad, X, Y, eps=s["rps_eps"], n_samples=s["rps_samples"], clamp=s["clamp"],
                generator=_generator(X, s["seed"]))
        ins = insertion(m, X, grad(m, X, Y), Y, protocol=s["protocol"])
        per_img[label] = (r.double().cpu().numpy(), 100 * ins.mean.double().cpu().numpy())
        rows.append(dict(model=label, accuracy=100 * m.zoo_meta["test_acc"],
                         grad_RPS=float(r.mean()), grad_Ins=100 * float(ins.mean.mean())))
    return pd.DataFrame(rows).set_index("model"), per_img


def attack_change(model, X, Y, x_adv, settings: dict):
    """How far the targeted attack moves the model's Grad maps, against noise of the same
    size: per image, the cosine distance of the attacked map to the clean one, and one minus
    the Grad RPS at the attack's budget (noise seeded ``seed + 1``)."""
    from robattr.attributions import reduce_channels
    from robattr.metrics import cosine_similarity, rps

    s = settings
    h_clean = reduce_channels(grad(model, X, Y), "abs_sum")
    h_adv = reduce_channels(grad(model, x_adv, Y), "abs_sum")
    attacked = 1 - cosine_similarity(h_adv.flatten(1), h_clean.flatten(1))
    random = 1 - rps(model, grad, X, Y, eps=s["attack_eps"], n_samples=s["rps_samples"],
                     clamp=s["clamp"], generator=_generator(X, s["seed"] + 1))
    return attacked, random


def rps_at(models: dict, labels, X, Y, eps: float, settings: dict) -> dict:
    """Per-image Grad RPS of the models ``labels`` at the noise budget ``eps``."""
    from robattr.metrics import rps

    s = settings
    return {reg: rps(models[reg], grad, X, Y, eps=eps, n_samples=s["rps_samples"],
                     clamp=s["clamp"], generator=_generator(X, s["seed"])).double().cpu().numpy()
            for reg in labels}
