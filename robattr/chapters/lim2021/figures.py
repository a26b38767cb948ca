"""The lim2021 chapter's figures (each returns its figure; the notebook shows it).

* :func:`plot_class_scores` (Fig. 6), :func:`plot_class_masks` (masks for every class);
* :func:`plot_moves`, :func:`plot_targeted_retrieval`, :func:`plot_attacked_maps` (the
  targeted-transfer notebook);
* :func:`plot_eq5`, :func:`plot_eq7`, :func:`plot_sweep` (the theory notebook);
* :func:`plot_fig3`, :func:`plot_fig5` (the untargeted notebook).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

__all__ = ["plot_class_scores", "plot_class_masks", "plot_moves", "plot_targeted_retrieval",
           "plot_attacked_maps", "plot_eq5", "plot_sweep", "plot_eq7", "EPS_AXIS", "FIG3",
           "plot_fig3", "plot_fig5"]


def plot_class_scores(scores: Mapping, n_classes: int, source_class: int,
                      methods: Sequence[str] = ("SimGrad", "SmGrad", "IntGrad", "GradCAM",
                                                "RelEx")):
    """Fig. 6: the mean score of each explained class, one bar per method, clean images on
    the left and attacked ones on the right (``scores[(tag, method)]``: classes x images)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    w = 0.16
    for ax, tag in zip(axes, ("clean", "adversarial")):
        for j, meth in enumerate(methods):
            ax.bar(np.arange(n_classes) + (j - 2) * w, scores[(tag, meth)].mean(1), w, label=meth)
        ax.set_xticks(range(n_classes))
        ax.set_xlabel("explained class c")
        ax.set_title(f"{tag} images of class {source_class}")
    axes[0].set_ylabel(r"softmax score of c on $m_c \odot x$")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_class_masks(model, x: torch.Tensor, masks: torch.Tensor, masking: str = "pixel"):
    """One image ``x`` (C x H x W) and ``m_c ⊙ x`` for each class's mask ``masks[c]``, in a
    row. Returns the figure."""
    import matplotlib.pyplot as plt

    from robattr.chapters.lim2021.evaluate import masked_input
    from robattr.report.viz import to_image

    n = masks.shape[0]
    fig, axes = plt.subplots(1, n + 1, figsize=(12, 1.6))
    axes[0].imshow(to_image(x), cmap="gray")
    axes[0].set_title("x", fontsize=8)
    for c in range(n):
        img = masked_input(model, x[None], masks[c:c + 1], masking)[0]
        axes[c + 1].imshow(to_image(img), cmap="gray")
        axes[c + 1].set_title(f"c={c}", fontsize=8)
    for ax in axes:
        ax.axis("off")
    return fig


def plot_moves(moves, attacks: Sequence[str], floor_sp: float, floor_tk: float, top_k: int):
    """Spearman and top-k similarity (adversarial vs clean) of the attacked method's map and
    of RelEx's mask, per attack, with RelEx's noise floor. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharey="row")
    rows = (("spearman", floor_sp, "Spearman"), (f"top-{top_k}", floor_tk,
                                                 f"top-{top_k} intersection"))
    for j, attack in enumerate(attacks):
        sub = moves[moves["attack"] == attack]
        xs = np.arange(len(sub))
        for i, (key, floor, lab) in enumerate(rows):
            ax = axes[i, j]
            ax.bar(xs - 0.2, sub[f"{key} attacked"], 0.4, label="the attacked method's map")
            ax.bar(xs + 0.2, sub[f"{key} RelEx"], 0.4, label="RelEx's mask (transfer)")
            ax.axhline(floor, ls=":", c="k", label="RelEx noise floor")
            ax.set_xticks(xs, sub["attacked"])
            ax.set_title(f"{attack} attack: {lab}, adversarial vs clean", fontsize=9)
            ax.set_ylim(min(0, ax.get_ylim()[0]), 1.05)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("attacked method")
    fig.tight_layout()
    return fig


def plot_targeted_retrieval(ret, attacks: Sequence[str], attacked: Sequence[str],
                            explainers: Sequence[str]):
    """Fig. 4 / S2: the retrieval rate of every explainer (``ret[(attack, attacked)][ex]``),
    one bar colour per attacked method, one panel per attack. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    width = 0.8 / len(attacked)
    for ax, attack in zip(axes, attacks):
        for i, meth in enumerate(attacked):
            vals = [ret[(attack, meth)][ex] for ex in explainers]
            ax.bar(np.arange(len(explainers)) + (i - (len(attacked) - 1) / 2) * width, vals, width,
                   label=f"against {meth}")
        ax.set_xticks(np.arange(len(explainers)), explainers, rotation=20)
        ax.set_title(f"{attack} attack: retrieval of the clean class", fontsize=9)
        ax.set_ylim(0, 1.05)
    axes[0].set_ylabel(r"retrieval rate of $m_{adv}\odot x_{adv}$")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_attacked_maps(runs: Mapping, x: torch.Tensor, m0: Mapping, relex: str,
                       target_maps: Mapping, i0: int = 0):
    """One row per (attack, attacked method) for image ``i0``: the clean and attacked image,
    the target map (``target_maps[(attack, method)]``, ``None`` where there is none), the
    attacked method's map and RelEx's mask on each, each map scaled to its largest value (one
    colour bar). Returns the figure."""
    import matplotlib.pyplot as plt

    from robattr.report.viz import map_colorbar, show_map, to_image

    n_rows = len(runs)
    fig, axes = plt.subplots(n_rows, 7, figsize=(11, 1.6 * n_rows), squeeze=False)
    heads = ["clean x", "attacked x", "target map", "attacked method, clean",
             "attacked method, attacked", "RelEx, clean", "RelEx, attacked"]
    for r, ((attack, meth), row) in enumerate(runs.items()):
        # images in colour where they have it, masks averaged over their channels
        ims = [to_image(x[i0]), to_image(row["x_adv"][i0]), target_maps[(attack, meth)],
               m0[meth][i0].mean(0), row["madv"][meth][i0].mean(0), m0[relex][i0].mean(0),
               row["madv"][relex][i0].mean(0)]
        for c, im in enumerate(ims):
            ax = axes[r, c]
            ax.axis("off")
            if im is None:
                continue
            if c < 2:
                ax.imshow(im, cmap="gray", vmin=0, vmax=1)
            else:
                image = show_map(ax, im, cmap="viridis")
            if r == 0:
                ax.set_title(heads[c], fontsize=7)
        axes[r, 0].text(-1.5, x.shape[-2] / 2 - 0.5, f"{attack[:6]}.\n{meth}", fontsize=7,
                        ha="right", va="center")
    fig.tight_layout()
    map_colorbar(fig, image, axes[:, 2:], label="map or mask / its largest value")
    return fig


def plot_eq5(trained: Mapping, model_names: Sequence[str], arch: str, masking: str,
             dataset: str):
    """Eq. 5's bound against the measured radius on the trained models, per mask (rows with
    ``c > 0`` that crossed), gradient directions marked +. Returns the seaborn grid."""
    import pandas as pd

    from robattr.report import viz

    parts = []
    for name in model_names:
        for mname in ("RelEx", "random", "ones"):
            r = trained[(name, mname)]
            ok = torch.isfinite(r["alpha"]) & (r["c"] > 0)
            parts.append(pd.DataFrame({"model": f"{name} {arch}", "mask": f"{mname} mask",
                                       "radius": r["alpha"][ok].numpy(),
                                       "bound": r["bound"][ok].numpy(),
                                       "gradient direction": r["is_grad"][ok].numpy()}))
    eq5 = pd.concat(parts, ignore_index=True)
    # violation as in the tables: bound > radius (1 + 1e-6)
    g = viz.measured_vs_bound(
        eq5, measured="radius", bound="bound", hue="mask", col="model", lower=True, log=True,
        rtol=1e-6, quantity=r"radius $\alpha$",
        units="pixel units" if masking == "pixel" else "normalised units", height=3.6,
        aspect=1.15,
        title=rf"Eq. 5 against the first crossing of $\tau$ ({dataset}); + = gradient direction")
    for model_name, ax in g.axes_dict.items():
        gd = eq5[(eq5["model"] == model_name) & eq5["gradient direction"]]
        ax.plot(gd["bound"], gd["radius"], "k+", ms=7)
    return g


def plot_sweep(sweep: Sequence[Mapping]):
    """The lambda1 sweep: median radii (random and gradient directions) and the median
    Eq. 5 bound against the mean l1 norm of the RelEx mask. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax1 = plt.subplots(figsize=(6, 3.8))
    l1 = [s["m_l1"] for s in sweep]
    ax1.plot(l1, [s["alpha_rand"] for s in sweep], "o-",
             label=r"median radius, random $v$ (capped at alpha_max)")
    ax1.plot(l1, [s["alpha_grad"] for s in sweep], "s-", label=r"median radius, gradient $v$")
    ax1.plot(l1, [s["bound"] for s in sweep], "^--", label="median Eq. 5 bound")
    for s in sweep:
        ax1.annotate(f"λ1={s['lam']:g}", (s["m_l1"], s["alpha_grad"]), fontsize=7)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel(r"mean $\Vert m\Vert_1$ of the RelEx mask")
    ax1.set_ylabel(r"radius $\alpha$")
    ax1.legend(fontsize=7)
    return fig


def plot_eq7(eq7_small: Mapping, name: str, radii: Sequence[float], masking: str):
    """Eq. 7 on model ``name``: the masked loss, the printed bound and the corrected bound,
    means over the images (``eq7_small[(name, radius)]``), against the radius. Returns the
    seaborn grid."""
    import pandas as pd

    from robattr.report import viz

    series = {r"$L(x_0+\alpha v, m)$": 0, "Eq. 7 as printed": 1, r"corrected: $+L(x_0,m)$": 2}
    eq7 = pd.DataFrame([{"curve": label, "alpha": a, "loss": float(eq7_small[(name, a)][i].mean())}
                        for label, i in series.items() for a in radii])
    return viz.metric_curves(
        eq7, x="alpha", y="loss", hue="curve", style="curve", col=None, xlabel=r"$\alpha$",
        x_units="pixel units" if masking == "pixel" else "normalised units",
        ylabel="loss, mean over images", y_units="nats", x_spacing="log", logy=True,
        errorbar=None, height=3.4, aspect=1.3,
        title=f"{name} model, RelEx masks, random directions")


#: The budget axis of the untargeted notebook's curves.
EPS_AXIS = dict(x="eps", xlabel=r"$\varepsilon$",
                x_units=r"paper's normalised scale; pixels = $\times$ eps_scale",
                x_spacing="log", errorbar=None, height=2.8, aspect=1.5)
#: Fig. 3's rows: score key -> label.
FIG3 = {"retrieval": r"retrieval with $m_{adv}\odot x_{adv}$",
        "clean": r"retrieval with $m_0\odot x_{adv}$",
        "l1": r"$\Vert m_{adv}\Vert_1/\Vert m_0\Vert_1$"}


def plot_fig3(frame):
    """Fig. 3 from :func:`robattr.chapters.lim2021.curve_frame` of :data:`FIG3` (column
    ``quantity``): one row per quantity, one column per model. Returns the seaborn grid."""
    from robattr.report import viz

    g = viz.metric_curves(frame, hue="method", style="family", row="quantity", col="model",
                          **EPS_AXIS)
    for ax, key in zip(g.axes[:, 0], FIG3):
        ax.set_ylabel("retrieval rate" if key != "l1" else "relative l1 norm")
    return g


def plot_fig5(frame):
    """Fig. 5 / S1 from :func:`robattr.chapters.lim2021.curve_frame` (column ``metric``):
    similarity of the maps on attacked and clean images. Returns the seaborn grid."""
    from robattr.report import viz

    return viz.metric_curves(frame, hue="method", style="family", row="metric", col="model",
                             ylabel=r"similarity, maps on $x_{adv}$ vs $x_0$", **EPS_AXIS)
