"""Fig. 1's 2-D toy: four two-layer networks on two moons, their nearby gradients, and the
statistics over random nearby pairs near each network's boundary.

Each network is a :func:`robattr.models.two_layer_scorer`: a score ``g`` fed to the
two-class softmax as ``(-g/2, g/2)``, so ``g`` is twice the second logit.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from robattr.train import Loss

__all__ = ["MaxEnt", "score", "score_and_grad", "toy_net", "train_toy_net", "boundary_pair",
           "plane_grid", "plot_toy_nets", "near_boundary_pairs", "pair_summary", "smaller"]


class MaxEnt(Loss):
    """BCE minus lam times the entropy of the prediction (Cha et al. 2020's regulariser)."""

    name = "maxent_toy"
    defaults = {"lam": 1.0}

    def __call__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor):
        logits = model(x)
        ce = F.cross_entropy(logits, y)
        p = logits.softmax(1)
        ent = -(p * p.clamp_min(1e-12).log()).sum(1).mean()
        return ce - self.lam * ent, {"ce": ce.detach(), "entropy": ent.detach(),
                                     "acc": self.accuracy(logits, y)}


@torch.no_grad()
def score(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The score ``g = 2 x (second logit)`` of a two-layer scorer (no gradient)."""
    return net(x)[:, 1] * 2


def score_and_grad(net: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The score ``g`` of a two-layer scorer and its input gradient."""
    x = x.detach().requires_grad_(True)
    g = net(x)[:, 1] * 2
    (dg,) = torch.autograd.grad(g.sum(), x)
    return g.detach(), dg


def toy_net(hidden: int, activation: str, beta: float, seed: int) -> nn.Module:
    """A fresh two-layer scorer on the plane, initialised from ``seed`` (``beta`` is used
    by Softplus only)."""
    from robattr.models import two_layer_scorer

    torch.manual_seed(seed)
    return two_layer_scorer(2, hidden, activation, beta if activation == "softplus" else None)


def train_toy_net(activation: str, loss, data: tuple, *, hidden: int, beta: float, epochs: int,
                  lr: float, seed: int) -> nn.Module:
    """:func:`toy_net` trained full batch on ``data = (X, y)`` with ``loss``, in eval mode."""
    from robattr.train import fit

    net = toy_net(hidden, activation, beta, seed)
    fit(net, data, loss=loss, epochs=epochs, batch_size=len(data[0]), lr=lr, seed=seed,
        device="cpu", progress=False, measure_memory=False)
    return net.eval()


def boundary_pair(net: nn.Module, X: torch.Tensor, dist: float) -> torch.Tensor:
    """The figure's pair: the point of ``X`` closest to ``net``'s boundary, and that point
    moved by ``dist`` along the boundary's tangent."""
    g, _ = score_and_grad(net, X)
    i0 = int(g.abs().argmin())
    x0 = X[i0:i0 + 1]
    _, n0 = score_and_grad(net, x0)
    tangent = torch.stack([-n0[:, 1], n0[:, 0]], 1)
    return torch.cat([x0, x0 + dist * tangent / tangent.norm()])


def plane_grid(points: np.ndarray, nx: int = 200, ny: int = 160, margin: float = 0.5):
    """An ``nx`` x ``ny`` grid over the box of ``points`` widened by ``margin``:
    ``(xs, ys, grid points as an (nx * ny, 2) float32 tensor)``."""
    xs = np.linspace(points[:, 0].min() - margin, points[:, 0].max() + margin, nx)
    ys = np.linspace(points[:, 1].min() - margin, points[:, 1].max() + margin, ny)
    grid = torch.tensor(np.stack(np.meshgrid(xs, ys), -1).reshape(-1, 2), dtype=torch.float32)
    return xs, ys, grid


def plot_toy_nets(nets: dict, xs, ys, grid, points: np.ndarray, labels: np.ndarray,
                  pair: torch.Tensor) -> pd.DataFrame:
    """Fig. 1: per network its score (colour), boundary (black), the data and the
    normalised gradients at the two points of ``pair``; returns the legend's numbers (ℓ2
    distance, cosine and the two gradient norms) per network."""
    fig, axes = plt.subplots(1, len(nets), figsize=(17, 4.2), squeeze=False)
    rows = []
    for ax, (label, net) in zip(axes[0], nets.items()):
        gg = score(net, grid).reshape(len(ys), len(xs)).numpy()
        lim = np.abs(gg).max()
        ax.contourf(xs, ys, gg, levels=20, cmap="RdBu_r", vmin=-lim, vmax=lim, alpha=0.7)
        ax.contour(xs, ys, gg, levels=[0], colors="k", linewidths=1)
        ax.scatter(points[:, 0], points[:, 1], c=labels, s=4, cmap="coolwarm", alpha=0.4)
        _, dg = score_and_grad(net, pair)
        u = dg / dg.norm(dim=1, keepdim=True)
        ax.quiver(pair[:, 0], pair[:, 1], u[:, 0], u[:, 1], color=["k", "m"], scale=6, width=0.012)
        l2 = float((dg[1] - dg[0]).norm())
        cos = float(F.cosine_similarity(dg[0:1], dg[1:2]))
        rows.append(dict(network=label, l2=l2, cos=cos, norm_x=float(dg[0].norm()),
                         norm_x2=float(dg[1].norm())))
        ax.plot([], [], " ", label=f"l2 = {l2:.3f}\ncos = {cos:.3f}\n"
                                   f"|grad| = {dg[0].norm():.2f}, {dg[1].norm():.2f}")
        ax.legend(loc="lower left", fontsize=8, handlelength=0)
        ax.set_title(label, fontsize=10)
        ax.set_xticks([]), ax.set_yticks([])
    plt.tight_layout()
    plt.show()
    return pd.DataFrame(rows).set_index("network")


def near_boundary_pairs(net: nn.Module, grid: torch.Tensor, n_pairs: int, dist: float,
                        gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_pairs`` random points of ``grid`` near ``net``'s boundary (``|g| < 1``; the whole
    grid if none is), each with a step ``delta`` of length ``dist`` in a random direction,
    drawn from ``gen``: ``(x, delta)``."""
    near = grid[score(net, grid).abs() < 1.0]
    near = near if len(near) else grid
    x = near[torch.randint(len(near), (n_pairs,), generator=gen)]
    d = torch.randn(n_pairs, 2, generator=gen)
    return x, dist * d / d.norm(dim=1, keepdim=True)


def pair_summary(net: nn.Module, x: torch.Tensor, delta: torch.Tensor) -> tuple[dict, dict]:
    """The gradients of ``g`` at ``x`` and ``x + delta``: the table's row (means and medians
    of the raw ℓ2 distance, the gradient norm, the cosine criterion and the ℓ2 distance of
    the normalised gradients) and the per-pair values (``"l2"``, ``"grad"``, ``"cosd"``)."""
    from robattr.bounds import alignment_criteria

    crit = alignment_criteria(net, x, delta, torch.ones(len(x), dtype=torch.long))
    _, ga = score_and_grad(net, x)
    _, gb = score_and_grad(net, x + delta)
    nl2 = (ga / ga.norm(dim=1, keepdim=True) - gb / gb.norm(dim=1, keepdim=True)).norm(dim=1)
    per_pair = {"l2": 2 * crit["l2"].double().numpy(), "grad": 2 * crit["grad_norm"].double().numpy(),
                "cosd": crit["cosd"].double().numpy()}
    row = {"mean l2 (raw)": float(crit["l2"].mean() * 2),
           "median l2 (raw)": float(crit["l2"].median() * 2),
           "median |grad g|": float(crit["grad_norm"].median() * 2),
           "median cosd": float(crit["cosd"].median()),
           "mean cosd": float(crit["cosd"].mean()),
           "mean l2 of normalised": float(nl2.mean())}
    return row, per_pair


def smaller(per_pair: dict, x: str, y: str, key: str, name: str):
    """Network ``x`` has a smaller mean ``key`` than network ``y``: the gap y − x over the
    random pairs (``per_pair``: network -> :func:`pair_summary`'s per-pair values). The pairs
    of two networks are drawn independently, so they are paired by draw index (the bootstrap
    of the differences then has the variance of a difference of two independent means);
    pairs with an undefined value are dropped."""
    from robattr.report import verdicts

    u, v = per_pair[x][key], per_pair[y][key]
    u, v = u[np.isfinite(u)], v[np.isfinite(v)]
    n = min(len(u), len(v))
    return verdicts.gap(v[:n], u[:n], what=f"{y.split()[0]} − {x.split()[0]} {name}")
