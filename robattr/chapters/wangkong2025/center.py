"""The center_smoothing notebook's steps: 002's Table 4 (center smoothing against ball
smoothing) and Fig. 3 (IG, Gaussian- and uniformly smoothed IG).

* :func:`saliency_map`, :func:`unit_saliency`: the saliency map of one class, and its unit-norm
  version;
* :func:`table4_rows`, :func:`table4_summary`, :func:`show_table4`, :func:`plot_table4`: the
  certified bounds on ``1 - cos`` per input and budget, their means beside the paper's;
* :func:`smoothed_ig_maps`, :func:`plot_maps`, :func:`map_agreement`: Fig. 3's maps and how
  close the smoothed maps stay to IG.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from robattr.chapters.wangkong2025.reports import kept_runs_note, reference_columns

__all__ = ["saliency_map", "unit_saliency", "table4_rows", "table4_summary", "show_table4",
           "plot_table4", "smoothed_ig_maps", "plot_maps", "map_agreement"]

#: Table 4's bound columns of :func:`table4_rows`: center smoothing (full, with gamma only) and
#: ball smoothing (empirical and unit M)
_BOUNDS = ["cs_bound", "cs_literal_2R", "ball_bound", "ball_unit"]
_NO_CERT = "no certificate: the quantile level p exceeds 1 at this budget"
_CS_FULL = r"center smoothing $\gamma(1+\beta)R_p$"


def saliency_map(model, xs: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """The saliency map (the gradient of the logit of class ``label``, a tensor of one item)
    at each input of the batch ``xs``."""
    from robattr.attributions import grad

    return grad(model, xs, label.expand(xs.shape[0]))


def unit_saliency(model, label: torch.Tensor):
    """``z -> `` the saliency map of class ``label`` at each input of ``z``, scaled to unit
    norm (norms below 1e-12 count as 1e-12)."""
    def unit_sm(z: torch.Tensor) -> torch.Tensor:
        m = saliency_map(model, z, label)
        return m / m.flatten(1).norm(dim=1).clamp_min(1e-12).reshape(-1, *[1] * (m.dim() - 1))

    return unit_sm


def table4_rows(model, x: torch.Tensor, y: torch.Tensor, *, n_eval: int,
                epsilons: Sequence[float], sigma: float, n_pred: int, n_cert: int,
                r_ball: float, n_ball: int, seed: int) -> pd.DataFrame:
    """Per input (the first ``n_eval``, input ``i`` with seed ``seed + i``) and budget: center
    smoothing's certified bound on ``1 - cos`` of the saliency map
    (:func:`robattr.bounds.center_smoothing_certificate`, Gaussian ``sigma``; ``cs_bound``
    and ``2 R_p`` alone, ``cs_literal_2R``) and the corrected ball-smoothing bound at radius
    ``r_ball`` from ``n_ball`` draws, with the empirical M (``ball_bound``) and for the
    unit-normalised map (``ball_unit``)."""
    from robattr.bounds import (ball_smoothing_cosine_bound, ball_smoothing_stats,
                                center_smoothing_certificate)

    d = x[0].numel()
    rows = []
    for i in range(n_eval):
        xi, yi = x[i], y[i:i + 1]
        cs = center_smoothing_certificate(lambda z, yi=yi: saliency_map(model, z, yi), xi,
                                          epsilons, sigma=sigma, distance="cosine",
                                          n_pred=n_pred, n_cert=n_cert, seed=seed + i)
        st = ball_smoothing_stats(model, x[i:i + 1], yi, r=r_ball, n_samples=n_ball,
                                  seed=seed + i)
        c, M, cu = float(st["h"].norm()), float(st["g_max"][0]), float(st["h_unit"].norm())
        for e, bnd, rad in zip(epsilons, cs["bound"], cs["radius"]):
            lo = ball_smoothing_cosine_bound(min(c, M), M, d, r_ball, e)
            lo_u = ball_smoothing_cosine_bound(min(cu, 1.0), 1.0, d, r_ball, e)
            rows.append(dict(sample=i, eps=f"{e:.1f}", accepted=cs["accepted"],
                             cs_bound=bnd, cs_literal_2R=2 * rad,
                             ball_bound=1 - lo, ball_unit=1 - lo_u))
    return pd.DataFrame(rows)


def table4_summary(cs_df: pd.DataFrame) -> pd.DataFrame:
    """The bounds of :func:`table4_rows` averaged over the inputs, per budget ``eps``."""
    return cs_df.groupby("eps", as_index=False)[_BOUNDS].mean()


def show_table4(summary: pd.DataFrame, *, dataset: str, r_ball: float) -> None:
    """Show Table 4: the mean certified bound on ``1 - cos`` of center smoothing, ours on
    ``dataset`` beside the paper's and the kept reference runs', with our other bounds."""
    from robattr.report import papers, viz

    ours_label = f"center smoothing, ours ({dataset})"
    ours = summary.rename(columns={"cs_bound": "value"})
    cmp = papers.compare(ours, "wangkong2025_table4", on=["eps"], ours_label=ours_label,
                         paper_label="paper (MNIST)")
    cmp = cmp.merge(summary.rename(columns={
        "cs_literal_2R": "center smoothing with gamma only (2 R_p)",
        "ball_bound": f"ball smoothing r={r_ball} (corrected, empirical M)",
        "ball_unit": f"ball smoothing r={r_ball} (unit-normalised, M = 1)"}).drop(
            columns="cs_bound"), on="eps")
    refs = reference_columns(cmp.columns)
    why = {**{s: "the kept reference run recorded no value for this cell" for s in refs.values()},
           "paper (MNIST)": viz.NOT_IN_PAPER, ours_label: _NO_CERT,
           "center smoothing with gamma only (2 R_p)": _NO_CERT}
    viz.show_table(cmp.drop(columns="note").rename(columns=refs).set_index("eps").round(3),
                   why=why, caption="Table 4, the certified bound on 1 − cos, ours and the "
                                    "paper's, with the ball-smoothing bound" + kept_runs_note(refs))


def plot_table4(summary: pd.DataFrame, *, dataset: str, r_ball: float) -> None:
    """Table 4 as curves over the budget: center smoothing (full, ``2 R_p`` only) and ball
    smoothing, ours, and the paper's center smoothing; the line 1 marks a vacuous bound."""
    import matplotlib.pyplot as plt

    from robattr.report import papers, viz

    e = [float(v) for v in summary.eps]
    pp = papers.table("wangkong2025_table4")
    ours = f"ours ({dataset})"
    table4_fig = pd.concat([
        pd.DataFrame({"eps": e, "value": summary.cs_bound, "method": _CS_FULL, "source": ours}),
        pd.DataFrame({"eps": e, "value": summary.cs_literal_2R,
                      "method": r"center smoothing, $2R_p$ only", "source": ours}),
        pd.DataFrame({"eps": e, "value": summary.ball_bound,
                      "method": f"ball smoothing r = {r_ball}", "source": ours}),
        pd.DataFrame({"eps": pp.eps.astype(float), "value": pp.value, "method": _CS_FULL,
                      "source": "paper (MNIST)"}),
    ], ignore_index=True)
    g_t4 = viz.metric_curves(table4_fig, hue="method", style="source", col=None,
                             ylabel="certified bound on 1 − cos", errorbar=None, height=3.3,
                             aspect=1.5)
    g_t4.ax.axhline(1, color="k", lw=0.8)
    plt.show()


def smoothed_ig_maps(model, x: torch.Tensor, y: torch.Tensor, *, ig_steps: int, r_ball: float,
                     n_ball: int, seed: int) -> dict[str, torch.Tensor]:
    """Fig. 3's maps of the batch: IG (``ig_steps`` points), Gaussian-smoothed IG (sigma
    ``r_ball / sqrt(d)``) and uniformly smoothed IG (radius ``r_ball``), ``n_ball`` draws."""
    import functools

    from robattr.attributions import integrated_gradients, noise_average
    from robattr.attributions.noise import gaussian_one
    from robattr.bounds import ball_smoothing_stats

    d = x[0].numel()
    ig = functools.partial(integrated_gradients, steps=ig_steps)
    m_ig = ig(model, x, y)
    m_gauss = noise_average(model, x, y, ig,
                            lambda z, g: gaussian_one(z, r_ball / np.sqrt(d), g),
                            n_samples=n_ball, seed=seed)
    m_ball = ball_smoothing_stats(model, x, y, r=r_ball, n_samples=n_ball, base=ig,
                                  seed=seed)["h"]
    return {"IG": m_ig, "Gaussian-smoothed IG": m_gauss, "uniformly smoothed IG": m_ball}


def plot_maps(x: torch.Tensor, maps: dict[str, torch.Tensor]) -> None:
    """One row per input: the input, then each map of ``maps`` (signed, summed over the
    colour channels, each scaled to its largest absolute value: one colour bar)."""
    import matplotlib.pyplot as plt

    from robattr.report.viz import map_colorbar, show_map, to_image

    n = len(x)
    fig, axes = plt.subplots(n, 4, figsize=(7, 1.8 * n))
    for i in range(n):
        axes[i, 0].imshow(to_image(x[i]), cmap="gray")
        for j, (name, mm) in enumerate(maps.items()):
            v = mm[i].sum(0).cpu()          # signed map summed over the colour channels
            image = show_map(axes[i, j + 1], v, signed=True)
            if i == 0:
                axes[i, j + 1].set_title(name, fontsize=8)
    for ax in axes.ravel():
        ax.axis("off")
    axes[0, 0].set_title("input", fontsize=8)
    plt.tight_layout()
    if maps:
        map_colorbar(fig, image, axes[:, 1:], signed=True)
    plt.show()


def map_agreement(maps: dict[str, torch.Tensor], k_top: int,
                  reference: str = "IG") -> pd.DataFrame:
    """For each map of ``maps`` but ``reference``, averaged over the inputs: its top-``k_top``
    intersection with the reference map, Kendall's tau_b, the paper's concordant fraction,
    ``(tau_b + 1) / 2`` and the cosine."""
    from robattr.metrics import cosine_similarity, kendall, topk_intersection

    ref, rows = maps[reference], []
    for name, m in maps.items():
        if name == reference:
            continue
        tau = kendall(ref, m, variant="tau_b")
        rows.append({"pair": f"{reference} vs {name}",
                     f"top-{k_top} intersection": float(topk_intersection(ref, m, k_top).mean()),
                     "Kendall tau_b": float(tau.mean()),
                     "concordant fraction (paper)":
                         float(kendall(ref, m, variant="concordant").mean()),
                     "(tau_b + 1) / 2": float(((tau + 1) / 2).mean()),
                     "cosine": float(cosine_similarity(ref, m).mean())})
    return pd.DataFrame(rows)
