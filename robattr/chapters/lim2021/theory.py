"""The theory notebook's steps (004's Theorem 1, Eq. 7 and Theorem 2), on top of
:mod:`robattr.bounds` and the Theorem 1 helpers of :mod:`.evaluate`.

* :func:`small_net_rows`, :func:`small_net_table`: Theorem 1 on random small networks;
* :func:`trained_scale`: the scale line of the claims on the trained models;
* :func:`trained_rows`, :func:`trained_table`, :func:`thm1_counts`: Theorem 1 on the
  trained models with RelEx, random and all-ones masks;
* :func:`eq7_rows`: Eq. 7, printed and corrected, at the crossing and at fixed radii;
* :func:`sweep_row`, :func:`sweep_view`, :func:`sweep_trade_cells`, :func:`rank_corr`: the
  lambda1 trade-off;
* :func:`thm2_pairs`, :func:`thm2_random_pairs`, :func:`thm2_summary`, :func:`thm2_frame`:
  Theorem 2's pairs;
* :func:`small_net_note`, :func:`eq6_note`: the printed notes of §2 and §6;
* :class:`RampNet`: the exercise's network on which Eq. 5 fails.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from robattr.chapters.lim2021.evaluate import (random_masked_rows, random_small_net,
                                               thm1_along_directions, thm1_covered,
                                               thm1_violations)

__all__ = ["SMALL_KINDS", "THM2_RADII", "small_net_rows", "small_net_table", "trained_scale",
           "trained_rows", "trained_table", "thm1_counts", "eq7_rows", "sweep_row",
           "sweep_view", "sweep_trade_cells", "rank_corr", "thm2_pairs", "thm2_random_pairs",
           "thm2_summary", "thm2_frame", "RampNet", "small_net_note", "eq6_note"]

#: The random small networks of §2: kind -> number of classes.
SMALL_KINDS = {"linear, 2 classes": 2, "linear": 5, "tanh": 5, "softplus": 5, "relu": 5}
#: The distances of Theorem 2's pairs.
THM2_RADII = (0.01, 0.1, 0.5, 1.0, 2.0)


def _identity(it, **kw):
    return it


def small_net_rows(kind: str, k: int, n_random: int, generator: torch.Generator, *,
                   n_grid: int, d: int = 16, rows: int = 8,
                   progress: Callable = _identity) -> dict[str, torch.Tensor]:
    """:func:`robattr.bounds.thm1_check` on ``n_random`` random networks of ``kind`` with
    ``k`` classes (:func:`random_small_net`, :func:`random_masked_rows`, from ``generator``),
    ``rows`` rows each, concatenated. ``tau`` is 0.5 above the largest starting loss, or
    ``log 2`` for two classes (the exact case: a third derivative >= 0 up to the crossing)."""
    from robattr.bounds import thm1_check

    if n_random < 1:
        raise ValueError(f"n_random must be >= 1, got {n_random}")
    rs = []
    for _ in progress(range(n_random), desc=kind, leave=False):
        net = random_small_net(kind, d, k, generator)
        x, m, v, t = random_masked_rows(net, d, rows, generator)
        with torch.no_grad():
            tau = float((-torch.log_softmax(net(m * x), 1).gather(1, t[:, None])).max()) + 0.5
        if k == 2:
            tau = math.log(2)
        rs.append(thm1_check(net, x, m, v, t, tau=tau, alpha_max=200.0, n_grid=n_grid))
    return {key: torch.cat([r[key] for r in rs]) for key in rs[0]}


def small_net_table(small: Mapping[str, Mapping[str, torch.Tensor]]) -> list[dict]:
    """One row per kind of random network: crossing rows, Eq. 5 violations, the worst
    bound / alpha, violations where the trapezoid covers ``c``, Lipschitz violations and
    violations of the corrected Eq. 7; the Eq. 5 and Lipschitz counts are recorded."""
    from robattr.report.results import record

    table = []
    for kind, r in small.items():
        n_ok, bad, ratio = thm1_violations(r)
        bad_cov, n_cov = thm1_covered(r)
        bad7 = int((torch.isfinite(r["alpha"]) & (r["loss_at"] > r["eq7_corrected"] + 1e-9)).sum())
        table.append({"model": kind, "rows": n_ok, "Eq.5 viol.": bad,
                      "worst bound/alpha": float(ratio.max()) if ratio.numel() else float("nan"),
                      "viol. where trapezoid >= c": f"{bad_cov} of {n_cov}",
                      "Lipschitz viol.": thm1_violations(r, "lipschitz")[1],
                      "corr. Eq.7 viol.": bad7})
        record("thm1_eq5_violations", bad, model=kind, rows=n_ok)
        record("thm1_lipschitz_violations", table[-1]["Lipschitz viol."], model=kind, rows=n_ok)
    return table


def trained_scale(models: Mapping[str, nn.Module], *names: str, dataset: str, arch: str,
                  n: int):
    """Sets the scale of the claims that follow: the trained models they rest on (``names``,
    default: all of ``models``), with their accuracy and training budget, and ``n`` images."""
    from robattr.report import verdicts

    names = names or tuple(models)
    label = " and ".join({"natural": "natural", "robust": "PGD-trained"}[k] for k in names)
    return verdicts.set_scale(dataset, f"{label} {arch} model{'s' * (len(names) > 1)}", n,
                              unit="images", models=[models[k] for k in names])


def trained_rows(models: Mapping[str, nn.Module], x: torch.Tensor, y: torch.Tensor,
                 generator: torch.Generator, *, relex_epochs: int, n_noisy: int, seed: int,
                 n_dirs: int, tau: float, alpha_max: float, n_grid: int):
    """Theorem 1 on the trained models: per model, its RelEx mask (from ``seed``), a random
    mask (uniform, from ``generator``) and the all-ones mask, each checked along ``n_dirs``
    random directions and the gradient one (:func:`thm1_along_directions`).

    Returns ``(trained, relex_masks)``: ``trained[(model, mask)]`` the rows on the CPU."""
    from robattr.attributions import relex

    trained, relex_masks = {}, {}
    for name, model in models.items():
        m_relex = relex(model, x, y, epochs=relex_epochs, n_noisy=n_noisy,
                        generator=torch.Generator().manual_seed(seed))
        relex_masks[name] = m_relex
        masks = {"RelEx": m_relex, "random": torch.rand(x.shape, generator=generator).to(x.device),
                 "ones": torch.ones_like(x)}
        for mname, m in masks.items():
            r = thm1_along_directions(model, x, m, y, n_dirs=n_dirs, generator=generator,
                                      tau=tau, alpha_max=alpha_max, n_grid=n_grid)
            trained[(name, mname)] = {kk: vv.detach().cpu() for kk, vv in r.items()}
    return trained, relex_masks


def trained_table(trained: Mapping) -> list[dict]:
    """One row per (model, mask): mean ``||m||_1``, rows with ``c > 0``, crossing rows, Eq. 5
    and Lipschitz violations and the largest bound / alpha; the counts are recorded."""
    from robattr.report.results import record

    table = []
    for (name, mname), r in trained.items():
        n_ok, bad, ratio = thm1_violations(r)
        bad_l = thm1_violations(r, "lipschitz")[1]
        table.append({"model": name, "mask": mname, "||m||_1": float(r["m_l1"].mean()),
                      "c>0": int((r["c"] > 0).sum()), "crossed": n_ok, "Eq.5 viol.": bad,
                      "Lipschitz viol.": bad_l,
                      "max bound/alpha": float(ratio.max()) if ratio.numel() else float("nan")})
        record("thm1_eq5_violations", bad, model=name, mask=mname, rows=n_ok)
        record("thm1_lipschitz_violations", bad_l, model=name, mask=mname, rows=n_ok)
    return table


def thm1_counts(trained: Mapping) -> dict[str, int]:
    """Over all rows of ``trained``: ``all`` rows, ``safe`` (``c > 0``), ``crossed`` (safe and
    reaching tau) and ``violations`` of Eq. 5 among them."""
    return {"all": sum(r["alpha"].numel() for r in trained.values()),
            "safe": sum(int((r["c"] > 0).sum()) for r in trained.values()),
            "crossed": sum(thm1_violations(r)[0] for r in trained.values()),
            "violations": sum(thm1_violations(r)[1] for r in trained.values())}


def eq7_rows(trained: Mapping, models: Mapping[str, nn.Module], relex_masks: Mapping,
             x: torch.Tensor, y: torch.Tensor, generator: torch.Generator,
             radii: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0)):
    """Eq. 7 as printed and corrected: violations at the crossing radius of every row of
    ``trained``, then at fixed ``radii`` along one random direction per model (drawn from
    ``generator``) with the RelEx masks.

    Returns ``(rows, eq7_small)``: rows ``(model, mask, radius, rows, printed violations,
    corrected violations)``; ``eq7_small[(model, radius)]`` = (loss, printed, corrected)."""
    from robattr.bounds import masked_grad, thm1_loss_bound

    rows = []
    for (name, mname), r in trained.items():
        ok = torch.isfinite(r["alpha"]) & (r["c"] > 0)
        rows.append((name, mname, "crossing", int(ok.sum()),
                     int((ok & (r["loss_at"] > r["eq7_printed"] + 1e-9)).sum()),
                     int((ok & (r["loss_at"] > r["eq7_corrected"] + 1e-9)).sum())))
    eq7_small = {}
    for name, model in models.items():
        m = relex_masks[name]
        v = torch.randn(x.shape, generator=generator).to(x.device)
        v = v / v.flatten(1).norm(dim=1).reshape(-1, *([1] * (x.dim() - 1)))
        loss0, g0 = masked_grad(model, x, m, y)
        for a in radii:
            loss1, g1 = masked_grad(model, x + a * v, m, y)
            args = (a, m.flatten(1).sum(1), g0.flatten(1).norm(dim=1),
                    (g1 - g0).flatten(1).norm(dim=1))
            pr = thm1_loss_bound(*args, printed=True).to(loss1)
            co = thm1_loss_bound(*args, loss0).to(loss1)
            eq7_small[(name, a)] = (loss1.cpu(), pr.cpu(), co.cpu())
            rows.append((name, "RelEx", f"alpha={a:g}", x.shape[0],
                         int((loss1 > pr + 1e-9).sum()), int((loss1 > co + 1e-9).sum())))
    return rows, eq7_small


def sweep_row(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lam: float,
              generator: torch.Generator, *, relex_epochs: int, n_noisy: int, seed: int,
              n_dirs: int, tau: float, alpha_max: float, n_grid: int) -> dict:
    """One lambda1 of the trade-off: RelEx's mask with ``lambda1=lam``, Theorem 1 along
    ``n_dirs`` random directions and the gradient one, and the summary: mean ``||m||_1``,
    share safe, mean ``c``, median radii (random and gradient directions, capped at
    ``alpha_max``), median bound, share censored, and per image the gradient radius and the
    median random radius (0 where the masked input is not safe at ``x_0``)."""
    from robattr.attributions import relex

    m = relex(model, x, y, epochs=relex_epochs, n_noisy=n_noisy, lambda1=lam,
              generator=torch.Generator().manual_seed(seed))
    r = thm1_along_directions(model, x, m, y, n_dirs=n_dirs, generator=generator, tau=tau,
                              alpha_max=alpha_max, n_grid=n_grid)
    isg, k = r["is_grad"], n_dirs + 1
    ok = (r["c"] > 0)
    capped = torch.where(torch.isfinite(r["alpha"]), r["alpha"],
                         torch.full_like(r["alpha"], alpha_max))
    # per image, for the paired claim: radius 0 where the masked input is not safe at x_0
    rad = torch.where(ok, capped, torch.zeros_like(capped)).reshape(k, -1).cpu()
    return dict(lam=lam, m_l1=float(m.flatten(1).sum(1).mean()), safe=float(ok.float().mean()),
                c=float(r["c"][ok].mean()), alpha_rand=float(capped[ok & ~isg].median()),
                alpha_grad=float(capped[ok & isg].median()),
                bound=float(r["bound"][ok & ~isg].median()),
                censored=float((~torch.isfinite(r["alpha"]) & ok).float().mean()),
                rad_grad=rad[-1].numpy(), rad_rand=rad[:-1].median(0).values.numpy())


def sweep_view(sweep: Sequence[Mapping]):
    """The sweep as a table for display (one row per lambda1, without the per-image radii),
    its ``alpha_*`` and ``bound`` columns renamed; each ``m_l1`` and ``alpha_grad`` recorded."""
    import pandas as pd

    from robattr.report.results import record

    df = (pd.DataFrame(sweep).drop(columns=["rad_grad", "rad_rand"]).set_index("lam").round(4)
          .rename(columns={"alpha_rand": "median alpha (random v)", "alpha_grad": "(grad v)",
                           "bound": "median bound"}))
    for s in sweep:
        record("lambda1_sweep_m_l1", s["m_l1"], lambda1=s["lam"])
        record("lambda1_sweep_alpha_grad", s["alpha_grad"], lambda1=s["lam"])
    return df


def rank_corr(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (:func:`robattr.metrics.spearman`:
    ties take their average rank, as ``scipy.stats.spearmanr``)."""
    from robattr.metrics import spearman

    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"a and b need the same length >= 2, got {len(a)} and {len(b)}")
    x, y = (torch.as_tensor(np.asarray(v, dtype=np.float64)).reshape(1, -1) for v in (a, b))
    return float(spearman(x, y)[0])


def sweep_trade_cells(sweep: Sequence[Mapping]):
    """The sparsest against the densest mask of the sweep, paired over images, along the
    gradient and over random directions. Returns ``(cells, sparsest, dense)``."""
    from robattr.report import verdicts

    dense = max(sweep, key=lambda s: s["m_l1"])
    sparsest = min(sweep, key=lambda s: s["m_l1"])
    trade = {"gradient direction": verdicts.gap(
                 sparsest["rad_grad"], dense["rad_grad"],
                 what="radius along the gradient, sparsest − densest mask"),
             "random directions": verdicts.gap(
                 sparsest["rad_rand"], dense["rad_rand"],
                 what="median radius over random directions, sparsest − densest mask")}
    return trade, sparsest, dense


def thm2_pairs(models: Mapping[str, nn.Module], x: torch.Tensor, y: torch.Tensor,
               relex_masks: Mapping, generator: torch.Generator, n_dirs: int,
               radii: Sequence[float] = THM2_RADII) -> list[tuple]:
    """Theorem 2 (:func:`robattr.bounds.thm2_check`) on the trained models: masks RelEx's,
    RelEx's initial ``U(0, 0.01)`` and one-pixel masks (0.5 on the brightest entry); pairs
    ``x + rho v`` for each ``rho`` in ``radii`` and ``max(1, n_dirs // 4)`` random unit ``v``
    (from ``generator``), each read with the proof's ``g`` and with Eq. 6's.

    Returns rows ``(model, mask, rho, eq6, lhs, rhs, ||m||_1)`` (tensors on the CPU)."""
    from robattr.bounds import thm2_check

    t2 = []
    view = (-1,) + (1,) * (x.dim() - 1)
    for name, model in models.items():
        one_pixel = torch.zeros_like(x).flatten(1)
        one_pixel[torch.arange(x.shape[0]), x.flatten(1).argmax(1)] = 0.5
        init = 0.01 * torch.rand(x.shape, generator=generator).to(x.device)   # S2.1
        for mname, mm in (("RelEx", relex_masks[name]), ("U(0, 0.01) init", init),
                          ("one pixel", one_pixel.reshape(x.shape))):
            for rho in radii:
                for _ in range(max(1, n_dirs // 4)):
                    v = torch.randn(x.shape, generator=generator).to(x.device)
                    xi = x + rho * v / v.flatten(1).norm(dim=1).reshape(view)
                    for eq6 in (False, True):
                        r = thm2_check(model, x, mm, xi, y, eq6=eq6)
                        t2.append((name, mname, rho, eq6, r["lhs"].cpu(), r["rhs"].cpu(),
                                   r["m_l1"].cpu()))
    return t2


def thm2_random_pairs(n_random: int, generator: torch.Generator,
                      kinds: Sequence[str] = ("tanh", "relu")) -> list[tuple]:
    """Theorem 2's identity on ``n_random`` random small networks of each kind (16 inputs, 5
    classes, 8 random rows, one distance uniform in [0.01, 3] from the global generator);
    rows as :func:`thm2_pairs` with mask ``"random"``."""
    from robattr.bounds import thm2_check

    t2 = []
    for kind in kinds:
        for _ in range(n_random):
            net = random_small_net(kind, 16, 5, generator)
            x, m, v, t = random_masked_rows(net, 16, 8, generator)
            rho = float(torch.empty(1).uniform_(0.01, 3))
            xi = x + rho * v / v.norm(dim=1, keepdim=True)
            for eq6 in (False, True):
                r = thm2_check(net, x, m, xi, t, eq6=eq6)
                t2.append((kind, "random", rho, eq6, r["lhs"], r["rhs"], r["m_l1"]))
    return t2


def thm2_summary(t2: Sequence[tuple]):
    """Theorem 2's violations (``lhs > rhs (1 + 1e-9) + 1e-12``) per (model, mask, Eq. 6
    reading), recorded as ``thm2_violations``.

    Returns ``(summary, pairs, l1, table)``: violations, pairs and ``||m||_1`` per key, and
    the rows of the table for display."""
    from robattr.report.results import record

    summary, pairs, l1, table = {}, {}, {}, []
    for key in sorted({row[:2] + (row[3],) for row in t2}):
        rows = [row for row in t2 if row[:2] + (row[3],) == key]
        lhs, rhs = (torch.cat([row[i] for row in rows]).double() for i in (4, 5))
        bad = int((lhs > rhs * (1 + 1e-9) + 1e-12).sum())
        summary[key], pairs[key] = bad, lhs.numel()
        l1[key] = torch.cat([row[6] for row in rows]).double()
        table.append({"model": key[0], "mask": key[1], "g read as": "Eq. 6" if key[2] else "Eq. S8",
                      "pairs": lhs.numel(), "violations": bad,
                      "max lhs/rhs": float((lhs / rhs.clamp_min(1e-300))[rhs > 0].max()),
                      "||m||_1 (min)": float(l1[key].min())})
        record("thm2_violations", bad, model=key[0], mask=key[1], g="eq6" if key[2] else "eqS8",
               pairs=lhs.numel())
    return summary, pairs, l1, table


def thm2_frame(t2: Sequence[tuple], model_names) -> "pd.DataFrame":  # noqa: F821
    """The pairs of the trained models (``model_names``) as a long table: mask, reading of
    ``g``, ``lhs`` and ``rhs``."""
    import pandas as pd

    parts = [pd.DataFrame({"mask": mname, "g": "g of Eq. 6" if eq6 else "g of Eq. S8 (the proof)",
                           "lhs": lhs.double().numpy(), "rhs": rhs.double().numpy()})
             for (name, mname, rho, eq6, lhs, rhs, _) in t2 if name in model_names]
    return pd.concat(parts, ignore_index=True)


class RampNet(nn.Module):
    """The exercise's two-class network in ``d = 1``: class 0's logit is 0, class 1's rises as
    the clipped ramp ``4 clip(x, 0, 1) = relu(4x) - relu(4x - 4)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z1 = torch.relu(4 * x) - torch.relu(4 * x - 4)
        return torch.cat([torch.zeros_like(z1), z1], 1)


def small_net_note(table: Sequence[Mapping]) -> str:
    """The line under §2's table: how many of the random models' crossing rows break Eq. 5."""
    bad, rows = sum(t["Eq.5 viol."] for t in table), sum(t["rows"] for t in table)
    return (f"Eq. 5 fails on {bad} of the {rows} rows of this run's random models"
            + ("." if bad else ": these draws hit no failure. The failures the argument above "
               "allows are shown by the five-class linear counterexample kept in the tests and "
               "by the ReLU ramp of the exercise (§7)."))


def eq6_note(summary: Mapping, pairs: Mapping, l1: Mapping, model_names,
             masks: Sequence[str]) -> list[str]:
    """One line per mask of ``masks``: the range of ``||m||_1`` of its pairs on the trained
    models (``model_names``) and how many of them break the bound read with Eq. 6's ``g``."""
    lines = []
    for mname in masks:
        keys = [k for k in summary if k[0] in model_names and k[1] == mname and k[2]]
        if not keys:
            raise ValueError(f"no Eq. 6 pairs with the mask {mname!r}")
        ls = torch.cat([l1[k] for k in keys])
        lines.append(f"  {mname} masks{' (built for this note)' if mname == 'one pixel' else ''}: "
                     f"||m||_1 from {float(ls.min()):.3g} to {float(ls.max()):.3g}; Eq. 6's "
                     f"reading fails on {sum(summary[k] for k in keys)} of "
                     f"{sum(pairs[k] for k in keys)} pairs")
    return lines
