"""The attack_check notebook's steps (002's Table 8): attacks on uniformly smoothed IG at the
certified budget.

* :func:`batch_budgets`: each input's certified budget (corrected and printed Cor. 1) per
  model and radius;
* :func:`attack_at_budgets`: the l2 attribution attack at each batch's smallest budget, with
  the clean/attacked cosine from fresh draws and a random shift of the same size as guard;
* :func:`table8_summary`, :func:`show_table8`: Table 8, ours beside the paper's;
* :func:`plot_attack_cosines`: the cosines per radius beside the paper's;
* :func:`random_point_shift`: the exercise's shift of ``h`` at a random point of the ball.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from robattr.chapters.wangkong2025.reports import kept_runs_note, reference_columns
from robattr.chapters.wangkong2025.tables import MODEL_LABELS

__all__ = ["ig_base", "batch_budgets", "attack_at_budgets", "table8_summary", "show_table8",
           "plot_attack_cosines", "random_point_shift"]


def ig_base(ig_steps: int):
    """Integrated Gradients with ``ig_steps`` path points: the attribution that is smoothed."""
    from robattr.attributions import integrated_gradients

    return functools.partial(integrated_gradients, steps=ig_steps)


def batch_budgets(models: dict, x: torch.Tensor, y: torch.Tensor, *, radii: Sequence[float],
                  T: float, n_cert: int, base, seed: int) -> dict:
    """``{(method, r): (corrected, printed)}``: each input's largest certified budget at
    threshold ``T`` (:func:`robattr.bounds.ball_smoothing_max_eps`), with ``||h||`` and the
    empirical M (largest ``||g||``) from ``n_cert`` draws of ``base``; ``||h||`` capped at M."""
    from robattr.bounds import ball_smoothing_max_eps, ball_smoothing_stats

    d = x[0].numel()
    budgets = {}
    for m, model in models.items():
        for r in radii:
            st = ball_smoothing_stats(model, x, y, r=r, n_samples=n_cert, base=base, seed=seed)
            c = st["h"].flatten(1).norm(dim=1).cpu().numpy()
            M = st["g_max"].cpu().numpy()
            budgets[m, r] = (ball_smoothing_max_eps(np.minimum(c, M), M, d, r, T, corrected=True),
                             ball_smoothing_max_eps(np.minimum(c, M), M, d, r, T, corrected=False))
    return budgets


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.flatten(1), b.flatten(1), dim=1)


def attack_at_budgets(models: dict, x: torch.Tensor, y: torch.Tensor, budgets: dict, *, T: float,
                      base, k: int, steps: int, step_size: float, restarts: int, n_attack: int,
                      n_check: int, seed: int) -> pd.DataFrame:
    """One row per input, model and radius of ``budgets`` (:func:`batch_budgets`): the top-``k``
    l2 attack (:func:`robattr.attacks.l2_attribution_attack`, random starts) on the smoothed
    map of ``n_attack`` draws, at the batch's smallest corrected budget; then the cosine of the
    clean and attacked maps (``cos``) and of the clean map and the map at a random point at
    the same distance (``cos_random``), from ``n_check`` fresh draws, with the Monte-Carlo
    tolerance ``mc_tol``; ``below_T`` and ``below_T_beyond_mc`` flag cosines below ``T``."""
    from robattr.attacks import l2_attribution_attack
    from robattr.attributions import ball_smoothed
    from robattr.attributions.noise import random_l2_shift
    from robattr.bounds import ball_smoothing_stats
    from robattr.bounds.ball import smoothed_cosine_tolerance

    rows = []
    for (m, r), (e_i, e_pr) in budgets.items():
        model, eps = models[m], float(np.min(e_i))
        res = l2_attribution_attack(model, x, y, k=k, eps=eps, steps=steps, step_size=step_size,
                                    restarts=restarts, random_start=True, keep_label=False,
                                    method=ball_smoothed(base, r=r, n_samples=n_attack),
                                    reduce=None, seed=seed)

        def smoothed(z, s, model=model, r=r):
            return ball_smoothing_stats(model, z, y, r=r, n_samples=n_check, base=base,
                                        seed=seed + s)

        h0, h1 = smoothed(x, 1), smoothed(res.x_adv, 2)   # fresh draws, other seeds for x, x_adv
        dist_t = (res.x_adv - x).flatten(1).norm(dim=1)
        h2 = smoothed(random_l2_shift(x, dist_t, seed=seed + 3), 2)   # the guard, h1's draws
        cs, cs_rand = _cos(h0["h"], h1["h"]).cpu().numpy(), _cos(h0["h"], h2["h"]).cpu().numpy()
        cos_tol = smoothed_cosine_tolerance(h0, h1, n_check).cpu().numpy()
        dist = dist_t.cpu().numpy()
        for i in range(len(cs)):
            rows.append(dict(model=MODEL_LABELS[m], r=f"{r:.1f}", sample=i, eps=eps,
                             eps_own=e_i[i], eps_printed=e_pr[i], dist=dist[i], cos=cs[i],
                             cos_random=cs_rand[i], mc_tol=cos_tol[i],
                             topk=float(res.criterion[i])))
    att = pd.DataFrame(rows)
    att["below_T"] = att["cos"] < T
    att["below_T_beyond_mc"] = att["cos"] < T - att["mc_tol"]
    return att


def table8_summary(att: pd.DataFrame) -> pd.DataFrame:
    """Per model and radius of :func:`attack_at_budgets`: the budget, the mean and smallest
    cosine, the mean top-k intersection and the counts of cosines below T."""
    return att.groupby(["model", "r"], as_index=False).agg(
        eps=("eps", "first"), cos_mean=("cos", "mean"), cos_min=("cos", "min"),
        topk_mean=("topk", "mean"), n_below_T=("below_T", "sum"),
        n_below_beyond_mc=("below_T_beyond_mc", "sum"))


def show_table8(att: pd.DataFrame, *, T: float, dataset: str, k: int) -> pd.DataFrame:
    """Show Table 8 (the smallest cosine after the attack per model and radius), ours on
    ``dataset`` beside the paper's MNIST values and the kept reference runs, with our other
    columns after them, and the notes of the paper's cells. Returns the compared frame."""
    from IPython.display import Markdown, display

    from robattr.report import papers, viz

    summary = table8_summary(att)
    ours = summary.rename(columns={"cos_min": "value"}).assign(T=str(T))
    ours_label = f"ours: min cos ({dataset})"
    cmp = papers.compare(ours, "wangkong2025_table8", on=["model", "r"],
                         where={"dataset": "MNIST", "T": str(T)},
                         ours_label=ours_label, paper_label="paper (MNIST)")
    cmp = cmp.merge(summary[["model", "r", "eps", "cos_mean", "topk_mean", "n_below_T",
                             "n_below_beyond_mc"]], on=["model", "r"], how="left")
    refs = reference_columns(cmp.columns)
    names = {"eps": "budget ε", "cos_mean": "mean cos", "topk_mean": f"top-{k} intersection",
             "n_below_T": "cosines below T",
             "n_below_beyond_mc": "below T beyond the Monte-Carlo error"}
    t8 = cmp.drop(columns="note").rename(columns={**refs, **names}).set_index(["model", "r"])
    why = {**{s: "the kept reference run recorded no value for this cell (a model or radius it "
                 "did not run)" for s in refs.values()}, "paper (MNIST)": viz.NOT_IN_PAPER}
    why.update({row: viz.NOT_RUN for row in t8.index[t8[ours_label].isna()]})
    viz.show_table(t8.round(4), why=why,
                   caption=f"Table 8 (T = {T}): the smallest cosine after the attack, ours on "
                           f"{dataset} beside the paper's MNIST values; the columns after the "
                           "paper's are ours" + kept_runs_note(refs))
    display(Markdown("*The paper's cells, as extracted:* " + "; ".join(
        f"at r = {', '.join(sorted(set(cmp.r[cmp.note == n])))}, {n}"
        for n in sorted(set(cmp.note) - {""})) + "."))
    return cmp


def plot_attack_cosines(att: pd.DataFrame, T: float) -> None:
    """Each attacked input's cosine per radius and model, beside the paper's MNIST curves,
    with the threshold ``T``."""
    import matplotlib.pyplot as plt

    from robattr.report import papers

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for j, (mk, g) in enumerate(att.groupby("model")):
        ax.scatter(g.r.astype(float) + 0.06 * (j - 1), g["cos"], s=14, label=f"{mk} (ours)")
    pp = papers.table("wangkong2025_table8")
    for j, (mk, g) in enumerate(pp.groupby("model")):
        ax.plot(g.r.astype(float), g.value, "--", alpha=0.5, label=f"{mk} (paper, MNIST)")
    ax.axhline(T, color="k", lw=1, label=f"T = {T}")
    ax.set(xlabel="radius r", ylabel="cos(h(x), h(x_adv))",
           ylim=(min(T - 0.05, att["cos"].min() - 0.02), 1.0))
    ax.legend(fontsize=7, ncol=2)
    plt.tight_layout()
    plt.show()


def random_point_shift(model, x1: torch.Tensor, y1: torch.Tensor, *, r: float, eps: float,
                       n_check: int, base, seed: int) -> tuple[float, float]:
    """``(shift, a)`` for one input ``x1`` (a batch of one): ``||h(x~) - h(x)||`` at a random
    point ``x~`` at distance ``eps`` (clamped to [0, 1]) and the crescent bound
    ``a = M V_U / V_S`` with the empirical M of ``n_check`` draws."""
    from robattr.bounds import ball_smoothing_stats, ball_volume_ratio

    st0 = ball_smoothing_stats(model, x1, y1, r=r, n_samples=n_check, base=base, seed=seed)
    a_bound = float(st0["g_max"][0]) * float(ball_volume_ratio(x1[0].numel(), r, eps))
    delta = torch.randn(x1.shape, generator=torch.Generator().manual_seed(seed)).to(x1.device)
    x_t = (x1 + eps * delta / delta.norm()).clamp(0, 1)
    st1 = ball_smoothing_stats(model, x_t, y1, r=r, n_samples=n_check, base=base, seed=seed)
    return float((st1["h"] - st0["h"]).norm()), a_bound
