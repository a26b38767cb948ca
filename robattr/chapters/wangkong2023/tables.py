"""The bookkeeping of 001's Tables 6–10 around :func:`robattr.bounds.evaluate_bounds`.

A *run* is the dict of per-image tensors that :func:`~robattr.bounds.evaluate_bounds` returns
for one (model, norm, ε) cell (``T_e``, ``T_prime_e``, ``T_c_deg``, ``dev_paper``,
``angle_paper``, ``dev_direct``, ``angle_direct``), plus ``dev_random``: the deviation under
random noise of the attacks' size (:func:`random_deviation`), the reference of the guard that
an attack must beat before a "bound holds" verdict means anything (:func:`guarded`).
This module turns runs into the tables' rows (:func:`bound_summary`, :func:`bound_table`,
:func:`side_by_side`), counts crossings (:func:`crossing_shares`, :func:`worst_cell`,
:func:`cases_within`, :func:`case_hits`) and labels budgets (:func:`eps_label`).

001 states its bounds for a classifier whose attribution is locally linear on the ball
(:data:`HYPOTHESIS_WANGKONG2023`). :func:`linear_share` judges a "the bound holds on at least a share of
the cases" claim under that hypothesis: on the cases whose map is locally linear at the budget
(:func:`robattr.bounds.linearity.budget_linearity`), with whole images resampled
(:func:`robattr.report.verdicts.share_clustered`, the groups from :func:`concat_groups`), and not
comparable when most cases break it.
"""
from __future__ import annotations


import torch

from robattr.bounds.jacobian import attribution_function

__all__ = ["HYPOTHESIS_WANGKONG2023", "random_deviation", "guarded", "bound_summary", "bound_table", "side_by_side",
           "crossing_shares", "worst_cell", "concat_runs", "cases_within", "eps_label",
           "linear_share", "linearity_measured", "concat_groups", "case_hits"]

NORMS = ("l2", "linf")
BOUNDS = ("T_e", "T_prime_e", "T_c")


def _norm(norm: str) -> str:
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    return norm


def random_deviation(model, x: torch.Tensor, y: torch.Tensor, method: str, norm: str, eps: float, *,
                     ig_steps: int = 16, seed: int = 0) -> torch.Tensor:
    """``‖g(x + δ) − g(x)‖`` per image (float64, CPU) for random noise δ of the attacks' size:
    ℓ2, a Gaussian direction scaled to norm ``eps``; ℓ∞, a random vertex of the cube
    (``±eps`` per pixel). ``g`` is the attribution ``method`` of ``model`` for the classes ``y``;
    the noise comes from a ``torch.Generator`` seeded with ``seed``."""
    _norm(norm)
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    fn = attribution_function(model, method, y, steps=ig_steps)
    gen = torch.Generator().manual_seed(seed)
    if norm == "l2":
        delta = torch.randn(x.shape, generator=gen).to(x.device, x.dtype)
        delta = eps * delta / delta.flatten(1).norm(dim=1).reshape(-1, *[1] * (x.dim() - 1))
    else:
        delta = eps * (2 * torch.randint(0, 2, x.shape, generator=gen) - 1).to(x.device, x.dtype)
    g0 = fn(x.clone().requires_grad_(True)).detach()
    g1 = fn((x + delta).requires_grad_(True)).detach()
    return (g1 - g0).flatten(1).norm(dim=1).double().cpu()


#: the hypotheses under which 001 states its bounds (Thm 1-2, Cor 1: "Given a twice-differentiable
#: classifier [...] assume that g^y is locally linear within the neighborhood of x")
HYPOTHESIS_WANGKONG2023 = ("wangkong2023 Thm 1-2: a twice-differentiable classifier whose attribution is locally "
                  "linear on the ball")


def guarded(rule, attacked, random, broken: str | None = None):
    """The claim's verdict ``rule``, unless the attack moves the maps no more than random noise
    does (:func:`robattr.report.verdicts.attack_effective`), in which case that verdict replaces it;
    and not comparable when ``broken`` says how the models break 001's hypothesis
    (:func:`robattr.models.not_twice_differentiable`; :func:`robattr.report.verdicts.within_hypothesis`)."""
    from robattr.report import verdicts

    guard = verdicts.attack_effective(attacked, random)
    return verdicts.within_hypothesis(guard if guard is not None else rule, HYPOTHESIS_WANGKONG2023, broken)


def bound_summary(run: dict) -> dict:
    """The means over the images of one run, under the tables' column names: ``T_hat_e``
    (the paper's attack's deviation), ``T_e``, ``T_prime_e``, ``T_hat_c_deg`` (its angle),
    ``T_c_deg``."""
    return {"T_hat_e": run["dev_paper"].mean(), "T_e": run["T_e"].mean(),
            "T_prime_e": run["T_prime_e"].mean(), "T_hat_c_deg": run["angle_paper"].mean(), "T_c_deg": run["T_c_deg"].mean()}


def bound_table(runs: dict, norm: str, quantities, labels: dict):
    """A tidy pandas DataFrame (eps, model, quantity, value) of the runs keyed (model, norm, ε)
    whose norm is ``norm``, keeping the :func:`bound_summary` columns in ``quantities``;
    ``labels`` maps a model key to its name in the table; ``eps`` is ``str(ε)``."""
    import pandas as pd

    _norm(norm)
    out = []
    for (name, nm, e), r in runs.items():
        if nm != norm:
            continue
        for q, v in bound_summary(r).items():
            if q in quantities:
                out.append({"eps": str(e), "model": labels[name], "quantity": q, "value": float(v)})
    return pd.DataFrame(out)


def side_by_side(compared, index, quantities, *, drop_empty_rows: bool = False):
    """A :func:`robattr.report.papers.compare` frame (columns ``quantity``, ``ours``, ``paper``) as a wide
    table: one row per ``index`` tuple, and for each quantity (in the given order) our value beside
    each reference run's and the paper's. ``drop_empty_rows`` drops the rows where every value is missing (index
    combinations that pivoting creates but neither side has)."""
    import pandas as pd

    from robattr.report.references import value_columns

    quantities = list(quantities)
    values = value_columns(compared)          # ours, any reference runs, the paper's
    w = compared.pivot_table(index=list(index), columns="quantity", values=values, dropna=False)
    w = w.reindex(columns=pd.MultiIndex.from_product([values, quantities]))
    if drop_empty_rows:
        w = w.dropna(how="all")
    return w.swaplevel(axis=1).reindex(columns=pd.MultiIndex.from_product([quantities, values]))


def crossing_shares(run: dict, attack: str, norm: str) -> dict:
    """Share of images (%) whose attacked deviation (attack ``attack``: "paper" or "direct")
    exceeds ``T_e`` and ``T_prime_e`` (ℓ2 only; NaN for ℓ∞), and whose angle exceeds ``T_c``."""
    _norm(norm)
    dv = run[f"dev_{attack}"]
    above_tp = float("nan") if norm == "linf" else 100 * float((dv > run["T_prime_e"]).double().mean())
    return {"> T_e (%)": 100 * float((dv > run["T_e"]).double().mean()),
            "> T'_e (%)": above_tp,
            "> T_c (%)": 100 * float((run[f"angle_{attack}"] > run["T_c_deg"]).double().mean())}


def worst_cell(viol, attack: str) -> float:
    """The largest share of images above the bound that applies (``T'_e`` for ℓ2, ``T_e`` for
    ℓ∞, ``T_c`` for both) over the cells of ``viol`` (rows of :func:`crossing_shares` with the
    columns ``norm`` and ``attack``) for attack ``attack``."""
    s_ = viol[viol.attack == attack]
    if s_.empty:
        raise ValueError(f"no rows for attack {attack!r}")
    return max(s_[s_.norm == "l2"]["> T'_e (%)"].max(), s_[s_.norm == "linf"]["> T_e (%)"].max(),
               s_["> T_c (%)"].max())


def concat_runs(runs, key: str) -> torch.Tensor:
    """One run quantity (``key``) of several runs, concatenated over their images."""
    return torch.cat([r_[key] for r_ in runs])


def cases_within(runs, attack: str, bounds) -> tuple[int, int]:
    """Over the images of ``runs``: how many have their attacked deviation within every bound in
    ``bounds`` (any of "T_e", "T_prime_e", "T_c"), and how many images there are."""
    ok = case_hits(runs, attack, bounds)
    return int(ok.sum()), len(ok)


def eps_label(e: float) -> str:
    """A budget as the paper prints it: ``k/255`` when ε·255 is an integer, else ``{ε:g}``."""
    n = e * 255
    return f"{round(n)}/255" if abs(n - round(n)) < 1e-9 else f"{e:g}"


def concat_groups(runs, key: str = "image"):
    """The image of every case of ``runs`` (each run holds ``key``: one id per image, e.g. the
    test-set index, with the block's name where blocks share indices), concatenated like
    :func:`concat_runs`: the groups of :func:`linear_share` and
    :func:`robattr.report.verdicts.share_clustered`."""
    import numpy as np

    parts = [np.asarray(r_[key]).ravel() for r_ in runs]
    for r_, p in zip(runs, parts):
        if len(p) != len(r_["T_e"]):
            raise ValueError(f"{key!r} must hold one id per image of its run ({len(r_['T_e'])}), got {len(p)}")
    return np.concatenate(parts) if parts else np.asarray([])


def case_hits(runs, attack: str, bounds) -> torch.Tensor:
    """Per case of ``runs``, whether the attacked deviation (``attack``: "paper" or "direct")
    stays within every bound in ``bounds`` (as :func:`cases_within` counts them): a bool tensor."""
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise ValueError(f"bounds must be among {BOUNDS}, got {sorted(unknown)}")
    ok = torch.ones(sum(len(r_["T_e"]) for r_ in runs), dtype=torch.bool)
    if "T_prime_e" in bounds:
        ok &= concat_runs(runs, f"dev_{attack}") <= concat_runs(runs, "T_prime_e")
    if "T_e" in bounds:
        ok &= concat_runs(runs, f"dev_{attack}") <= concat_runs(runs, "T_e")
    if "T_c" in bounds:
        ok &= concat_runs(runs, f"angle_{attack}") <= concat_runs(runs, "T_c_deg")
    return ok


def linearity_measured(linearity, groups, *, tol: float | None = None, probe: str = "±ε v_max",
                       group_unit: str = "images"):
    """``(linear, text)``: which cases are locally linear at the budget (Taylor remainder
    ``linearity`` at most ``tol`` of the first-order change, default
    :data:`~robattr.bounds.linearity.LINEARITY_TOL`) and one clause saying how many, on how many
    ``group_unit``, with the remainder's median and largest value; ``probe`` names where the
    remainder was measured."""
    import numpy as np

    from robattr.bounds.linearity import LINEARITY_TOL

    tol = LINEARITY_TOL if tol is None else float(tol)
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    lin = np.asarray(linearity.detach().cpu() if torch.is_tensor(linearity) else linearity,
                     dtype=float).ravel()
    groups = np.asarray(groups).ravel()
    if lin.shape != groups.shape:
        raise ValueError(f"linearity and groups need one entry per case, got {lin.size} and "
                         f"{groups.size}")
    if np.isnan(lin).any():
        raise ValueError("linearity holds NaN")
    linear = lin <= tol
    finite = lin[np.isfinite(lin)]
    spread = (f"median {np.median(lin):.3g}, largest " +
              (f"{finite.max():.3g}" if finite.size == lin.size else "inf")) if lin.size else "none"
    return linear, (f"local linearity at the budget (Taylor remainder at most {tol:g} of the "
                    f"first-order change at {probe}): met by {int(linear.sum())} of {lin.size} cases "
                    f"on {len(np.unique(groups))} {group_unit} (remainder {spread})")


def linear_share(hits, linearity, groups, *, at_least: float, tol: float | None = None,
                 min_share: float | None = None, what: str = "cases", group_unit: str = "images",
                 probe: str = "±ε v_max"):
    """"The bound holds on at least a share ``at_least`` of the cases", judged under 001's
    hypothesis that the attribution is locally linear on the ball.

    ``hits[i]``: case ``i`` stayed within the bound; ``linearity[i]``: its map's Taylor
    remainder relative to the first-order change at the budget
    (:func:`robattr.bounds.linearity.budget_linearity`); ``groups[i]``: its image. A case is
    locally linear when ``linearity <= tol`` (default
    :data:`~robattr.bounds.linearity.LINEARITY_TOL`). When at least ``min_share`` of the cases
    (default :data:`~robattr.bounds.linearity.MIN_LINEAR_SHARE`) are, the claim is judged on
    those cases by :func:`robattr.report.verdicts.share_clustered` (whole images resampled); otherwise
    the run's model breaks the hypothesis at this budget and the verdict is "not comparable".
    Either way the rule states how many cases were locally linear and what was measured (on
    all cases when not comparable). ``probe`` names where the linearity was measured. Like
    every :func:`~robattr.report.verdicts.share_clustered`, a share on too few distinct images to
    confirm it stays inconclusive."""
    import numpy as np

    from robattr.report import verdicts
    from robattr.bounds.linearity import MIN_LINEAR_SHARE

    min_share = MIN_LINEAR_SHARE if min_share is None else float(min_share)
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must be in (0, 1], got {min_share!r}")
    hits = np.asarray(hits.detach().cpu() if torch.is_tensor(hits) else hits, dtype=float).ravel()
    groups = np.asarray(groups).ravel()
    linear, measured = linearity_measured(linearity, groups, tol=tol, probe=probe,
                                          group_unit=group_unit)
    if not hits.size or hits.shape != groups.shape:
        raise ValueError(f"hits, linearity and groups need one entry per case, got {hits.size}, "
                         f"{linear.size} and {groups.size}")
    k, n = int(linear.sum()), linear.size
    if k < min_share * n:
        everything = verdicts.share_clustered(hits, groups, at_least=at_least, what=what,
                                              group_unit=group_unit)
        return verdicts.Verdict(
            "not comparable",
            f"outside the statement's hypothesis ({HYPOTHESIS_WANGKONG2023}): {measured}, fewer than "
            f"{min_share:.0%}; measured on all cases: {everything.rule}")
    v = verdicts.share_clustered(hits[linear], groups[linear], at_least=at_least,
                                 what=f"locally linear {what}", group_unit=group_unit)
    return verdicts.Verdict(v.verdict, f"{measured}; judged on those: {v.rule}")
