"""Every attack of ``robattr.attacks`` on one image, and every robust-training loss on one
dataset: the tour of the toolbox that ``example/attacks_and_defenses`` shows.

* :func:`run_every_attack`, :func:`attacked_inputs`: the five attribution attacks on one
  image, and their iterates beside random noise of the same budget;
* :func:`attack_metrics_table`, :func:`plot_attacked_maps`: each iterate against the clean
  Grad map by the five papers' metrics, and the pictures;
* :func:`topk_attack_vs_noise`, :func:`attack_vs_noise_report`: the top-k intersection under
  the top-k attack and under noise, over budgets;
* :func:`loss_table`, :func:`plot_cost_vs_stability`: every paper's training loss, its
  accuracy under PGD, the stability of its Grad map and its cost.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import torch
from torch import nn

from robattr import attacks, metrics
from robattr.report import viz
from robattr.attributions import grad, reduce_channels

__all__ = ["run_every_attack", "attacked_inputs", "attack_metrics_table", "plot_attacked_maps",
           "topk_attack_vs_noise", "attack_vs_noise_report", "loss_table",
           "plot_cost_vs_stability"]

#: the name of the random-noise row of :func:`attacked_inputs`
RANDOM = "random l-inf"


def run_every_attack(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, k: int, eps: float,
                     eps_l2: float, steps: int, surrogate_beta: float, seed: int,
                     frame_width: int) -> dict:
    """The five attribution attacks of the papers on ``x`` (predicted class ``y`` kept):
    ``{name: AttackResult}`` with the best iterate, its own criterion and its history.
    ``eps`` is the ℓ∞ budget of four of them, ``eps_l2`` the ℓ2 budget of wangkong2025's."""
    if x.ndim != 4:
        raise ValueError(f"x must be a batch (N, C, H, W), got shape {tuple(x.shape)}")
    common = dict(eps=eps, steps=steps, surrogate_beta=surrogate_beta, seed=seed)
    h, w = x.shape[-2:]
    return {
        "top-k (wang2020)": attacks.topk_attack(model, x, y, k=k, **common),
        "IFIA (wangkong2023)": attacks.ifia(model, x, y, k=k, **common),
        "l2 top-k (wangkong2025)": attacks.l2_attribution_attack(
            model, x, y, k=k, eps=eps_l2, steps=steps, surrogate_beta=surrogate_beta, seed=seed),
        "mass center (wang2020)": attacks.mass_center_attack(model, x, y, **common),
        "targeted, frame (joo2023)": attacks.targeted_attack(
            model, x, y, target_map=attacks.frame_target((h, w), frame_width), **common),
    }


def attacked_inputs(x: torch.Tensor, runs: dict, *, eps: float, seed: int) -> dict:
    """``{name: perturbed input}``: random ℓ∞ noise of size ``eps`` first (row
    ``"random l-inf"``), then each attack's best iterate in the order of ``runs``."""
    return {RANDOM: attacks.random_perturbation(x, eps=eps, norm="linf", seed=seed),
            **{name: result.x_adv for name, result in runs.items()}}


def attack_metrics_table(model: nn.Module, x: torch.Tensor, y: torch.Tensor, g0: torch.Tensor,
                         inputs: dict, runs: dict, k: int) -> pd.DataFrame:
    """One row per perturbed input of ``inputs``: label kept, its ℓ∞ and ℓ2 size, the attack's
    own criterion at the clean input and at the iterate (blank for a row not in ``runs``),
    and the top-k intersection, Spearman, cosine and centre dislocation of its Grad map
    against the clean map ``g0``."""
    rows = []
    for name, x_adv in inputs.items():
        g1 = grad(model, x_adv, y)
        result = runs.get(name)
        rows.append({
            "attack": name,
            "label kept": bool(model(x_adv).argmax(1) == y),
            "l-inf": float((x_adv - x).abs().max()),
            "l2": float((x_adv - x).norm()),
            "own criterion: clean -> attacked": "" if result is None else
                f"{float(result.history[0, 0, 0]):.3g} -> {float(result.criterion[0]):.3g}",
            f"top-{k} intersection": float(metrics.topk_intersection(g0, g1, k, reduce="abs_sum")),
            "Spearman": float(metrics.spearman(g0, g1, reduce="abs_sum")),
            "cosine": float(metrics.cosine_similarity(g0, g1)),
            "center dislocation (px)": float(metrics.center_dislocation(g0, g1)),
        })
    return pd.DataFrame(rows).set_index("attack")


def plot_attacked_maps(model: nn.Module, x: torch.Tensor, y: torch.Tensor, g0: torch.Tensor,
                       inputs: dict):
    """Two rows of pictures: the original and each perturbed input (grayscale, first channel),
    and under each its |Grad| map, each scaled to its largest value (one colour bar).
    Returns the figure."""
    fig, axes = plt.subplots(2, len(inputs) + 1, figsize=(2.0 * (len(inputs) + 1), 4.3))
    axes[0, 0].imshow(x[0, 0].cpu(), cmap="gray", vmin=0, vmax=1)
    axes[0, 0].set_title("original", fontsize=8)
    image = viz.show_map(axes[1, 0], reduce_channels(g0)[0])
    for j, (name, x_adv) in enumerate(inputs.items(), start=1):
        axes[0, j].imshow(x_adv[0, 0].cpu(), cmap="gray", vmin=0, vmax=1)
        axes[0, j].set_title(name, fontsize=8)
        viz.show_map(axes[1, j], reduce_channels(grad(model, x_adv, y))[0])
    axes[0, 0].set_ylabel("input"), axes[1, 0].set_ylabel("|Grad|")
    for ax in axes.flat:
        ax.set_xticks([]), ax.set_yticks([])
    fig.tight_layout()
    viz.map_colorbar(fig, image, axes[1])
    return fig


def topk_attack_vs_noise(model: nn.Module, x: torch.Tensor, y: torch.Tensor, g0: torch.Tensor,
                         budgets: Sequence[float], *, k: int, steps: int, surrogate_beta: float,
                         seed: int) -> pd.DataFrame:
    """The top-k intersection of the Grad map with the clean one ``g0`` under the top-k attack
    and under random ℓ∞ noise, at each budget: a tidy frame with columns ``eps``, ``value``
    and ``perturbation`` (``"top-k attack"`` rows first, then ``"random noise"``)."""
    budgets = list(budgets)
    if not budgets:
        raise ValueError("budgets must not be empty")
    att, rnd = [], []
    for e in budgets:
        xa = attacks.topk_attack(model, x, y, k=k, eps=e, steps=steps,
                                 surrogate_beta=surrogate_beta, seed=seed).x_adv
        xr = attacks.random_perturbation(x, eps=e, norm="linf", seed=seed)
        att.append(float(metrics.topk_intersection(g0, grad(model, xa, y), k, reduce="abs_sum")))
        rnd.append(float(metrics.topk_intersection(g0, grad(model, xr, y), k, reduce="abs_sum")))
    return pd.DataFrame({"eps": budgets * 2, "value": att + rnd,
                         "perturbation": ["top-k attack"] * len(budgets)
                         + ["random noise"] * len(budgets)})


def attack_vs_noise_report(curves: pd.DataFrame, k: int) -> str:
    """The lines that read :func:`topk_attack_vs_noise`'s frame: per budget the intersection
    under the attack and under noise, then the smallest budget where the attack is below
    the noise (or that it never is)."""
    att = curves[curves.perturbation == "top-k attack"]
    rnd = curves[curves.perturbation == "random noise"]
    if list(att.eps) != list(rnd.eps):
        raise ValueError("curves must hold the same budgets for the attack and the noise")
    budgets, att, rnd = list(att.eps), list(att.value), list(rnd.value)
    lines = [f"eps = {e:.2f}: top-{k} intersection {a:.3f} under the attack, {r:.3f} under noise"
             for e, a, r in zip(budgets, att, rnd)]
    below = [e for e, a, r in zip(budgets, att, rnd) if a < r]
    lines.append(f"the attack goes below noise first at eps = {below[0]}" if below
                 else "the attack never goes below noise here")
    return "\n".join(lines)


def loss_table(models: dict, x: torch.Tensor, y: torch.Tensor, *, seed: int,
               eps: float) -> pd.DataFrame:
    """One row per ``loss -> zoo model`` of ``models`` (the Softplus(3) models of
    :func:`~robattr.chapters.example.specs.attacks_and_defenses`): its test accuracy, its
    accuracy under a 10-step ℓ∞ PGD of size ``eps`` on ``(x, y)``, the RPS stability of its
    Grad map (mean cosine under uniform noise of size ``eps``, 4 draws), seconds per epoch
    and peak training memory, and the last two relative to ``"ce"`` (which must be among
    ``models``)."""
    if "ce" not in models:
        raise ValueError(f"models must include 'ce', the reference of the ratios, got "
                         f"{list(models)}")
    rows = []
    for name, m in models.items():
        meta = m.zoo_meta
        x_pgd = attacks.pgd(m, x, y, eps=eps, steps=10,
                            generator=torch.Generator().manual_seed(seed))
        rps = metrics.rps(m, grad, x, y, eps=eps, n_samples=4,
                          generator=torch.Generator().manual_seed(seed))
        rows.append({"loss": name, "test acc": meta["test_acc"],
                     f"PGD acc (eps={eps})": float((m(x_pgd).argmax(1) == y).float().mean()),
                     f"RPS cos (eps={eps})": float(rps.mean()),
                     "s / epoch": meta["seconds_per_epoch"],
                     "peak memory (MB)": meta["peak_memory_bytes"] / 2**20})
    table = pd.DataFrame(rows).set_index("loss")
    table["time vs CE"] = table["s / epoch"] / table.loc["ce", "s / epoch"]
    table["memory vs CE"] = table["peak memory (MB)"] / table.loc["ce", "peak memory (MB)"]
    return table


def plot_cost_vs_stability(table: pd.DataFrame, stability: str):
    """Each loss of :func:`loss_table` as a point: training time relative to CE (log scale)
    against the column ``stability`` (the Grad map's mean cosine). Returns the figure."""
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.scatter(table["time vs CE"], table[stability])
    for name, row in table.iterrows():
        ax.annotate(name, (row["time vs CE"], row[stability]), fontsize=8,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("training time per epoch, relative to CE (log scale)")
    ax.set_ylabel("Grad map stability (mean cosine)")
    return fig
