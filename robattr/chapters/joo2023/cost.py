"""Table 2's training cost and the hyper-parameter grid behind Table 1's model.

The cost is a controlled timing of one training step per regulariser (the times come from
:func:`robattr.timing.step_time_rounds`) and the zoo's recorded peak memory, both divided by
CE's; the grid trains ℓ2 + cosd at each (λ, λ_c) and applies 003's selection rule.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

__all__ = ["TABLE2_ROWS", "seconds_per_epoch", "recorded_time_ratios", "cost_rows", "cost_table",
           "cost_reasons", "lambda_grid", "grid_leads"]

#: Table 2's rows in the paper's order
TABLE2_ROWS = ("CE only", "ATEX (3rd step)", "IGA", "Hessian", "l2", "l2+Cosd")


def seconds_per_epoch(meta: dict) -> float:
    """A zoo model's recorded seconds per epoch (the mean where it recorded one per epoch)."""
    s = meta["seconds_per_epoch"]
    return float(np.mean(s)) if isinstance(s, (list, tuple)) else float(s)


def recorded_time_ratios(meta: dict, base: str = "CE only") -> dict:
    """Each model's recorded seconds per epoch over ``base``'s (``label -> zoo_meta``)."""
    return {k: seconds_per_epoch(m) / seconds_per_epoch(meta[base]) for k, m in meta.items()}


def cost_rows(step_times: dict, meta: dict, base: str = "CE only") -> pd.DataFrame:
    """Table 2's rows: per model (``label -> zoo_meta``), its median step time and its
    recorded peak memory over ``base``'s, with the absolute values as text."""
    step = {k: float(np.median(v)) for k, v in step_times.items()}
    rows = []
    for reg, m in meta.items():
        rows.append(dict(regularizer=reg, resource="time", value=step[reg] / step[base],
                         absolute=f"{1e3 * step[reg]:.1f} ms/step"))
        rows.append(dict(regularizer=reg, resource="memory",
                         value=m["peak_memory_bytes"] / meta[base]["peak_memory_bytes"],
                         absolute=f"{m['peak_memory_bytes'] / 2**20:.1f} MiB"))
    return pd.DataFrame(rows)


def cost_table(cmp: pd.DataFrame) -> pd.DataFrame:
    """The wide Table 2: one row per regulariser (the paper's order, then any other), for time
    and memory our absolute value and each source's ratio to CE."""
    from robattr.report.references import value_columns

    sources = ["absolute", *value_columns(cmp)]
    cols = [(src, res) for res in ("time", "memory") for src in sources]
    wide = cmp.pivot_table(index="regularizer", columns="resource", values=sources,
                           aggfunc="first", sort=False
                           ).reindex(columns=pd.MultiIndex.from_tuples(cols))
    wide.columns = [f"{res} · " + ("ours (absolute)" if src == "absolute" else f"{src} (x CE)")
                    for src, res in cols]
    return wide.reindex([r for r in TABLE2_ROWS if r in wide.index]
                        + [r for r in wide.index if r not in TABLE2_ROWS])


def cost_reasons(wide: pd.DataFrame) -> dict:
    """The reason of every "—" of :func:`cost_table`: the baselines this notebook does not
    time, and the paper's columns with a gap among the rest."""
    from robattr.report import viz

    not_built = {r: viz.NOT_BUILT for r in wide.index if r.startswith(("ATEX", "IGA"))}
    built = wide.drop(index=list(not_built))
    return {**not_built, **{c: viz.NOT_IN_PAPER for c in wide.columns
                            if c.endswith("paper (x CE)") and built[c].isna().any()}}


def lambda_grid(models: dict, params: dict, X, Y, ce_meta: dict) -> tuple[pd.DataFrame, dict]:
    """ℓ2 + cosd at every ``(grid_lam, grid_lam_cos)`` of the parameters (``run.params``:
    also the RPS settings, ``protocol`` and ``seed``), the models of ``models`` labelled
    :func:`~robattr.chapters.joo2023.specs.grid_label`, each evaluated by Grad RPS on
    ``(X, Y)``. Returns the table (accuracy, Grad RPS and its
    standard error, recorded time per epoch over CE's ``ce_meta``) and ``(λ, λ_c) ->
    per-image Grad RPS``."""
    from robattr.attributions import grad
    from robattr.chapters.joo2023.specs import grid_label
    from robattr.metrics import PROTOCOLS, rps

    p, rows, per_image = params, [], {}
    for lc in p["grid_lam_cos"]:
        for lm in p["grid_lam"]:
            m = models[grid_label(lm, lc)]
            r = rps(m, grad, X, Y, eps=p["rps_eps"], n_samples=p["rps_samples"],
                    clamp=PROTOCOLS[p["protocol"]]["rps_clamp"],
                    generator=torch.Generator(device=X.device).manual_seed(p["seed"]))
            per_image[lm, lc] = r.double().cpu().numpy()
            rows.append(dict(lam=lm, lam_cos=lc, accuracy=100 * m.zoo_meta["test_acc"],
                             grad_RPS=float(r.mean()), rps_se=float(r.std() / np.sqrt(len(r))),
                             time_ratio=seconds_per_epoch(m.zoo_meta) / seconds_per_epoch(ce_meta)))
    return pd.DataFrame(rows), per_image


def grid_leads(eligible: pd.DataFrame, per_image: dict):
    """The rule's pick among the ``eligible`` grid points (highest Grad RPS first) and its
    lead over each other one, paired by image (:func:`robattr.report.verdicts.gap`):
    ``((λ, λ_c), [verdict, ...])``; ``(None, [])`` with fewer than two points."""
    from robattr.report import verdicts

    if len(eligible) < 2:
        return None, []
    elig = eligible.sort_values("grad_RPS", ascending=False)
    best = (elig.lam.iloc[0], elig.lam_cos.iloc[0])
    return best, [verdicts.gap(per_image[best], per_image[lm, lc],
                               what=f"Grad RPS of (lambda, lambda_c) = ({best[0]:g}, {best[1]:g}) "
                                    f"minus ({lm:g}, {lc:g}), paired by image")
                  for lm, lc in zip(elig.lam.iloc[1:], elig.lam_cos.iloc[1:])]
