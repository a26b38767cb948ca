"""The figures of Table 1's notebook: Fig. 2 (insertion curves and the inserted images),
Fig. 3a (clean and attacked Grad maps) and the maps of the broken-maps check. Each draws
one figure and shows it."""
from __future__ import annotations

import matplotlib.pyplot as plt

from robattr.report import viz
from robattr.attributions import grad, reduce_channels

__all__ = ["plot_insertion_curves", "plot_inserted_images", "plot_attacked_maps",
           "plot_grad_maps"]


def _abs_map(model, x, y):
    """``|∇f_y(x)|`` summed over channels, on the CPU."""
    return reduce_channels(grad(model, x, y), "abs_sum")[0].cpu()


def plot_insertion_curves(curves: dict, labels, title: str, attr: str = "Grad") -> None:
    """Fig. 2's curves: the true-class probability against the inserted fraction for each
    model of ``labels``, clean order (solid) and attacked order (dotted)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for reg in labels:
        ins, ains = curves[reg, attr]
        line, = ax.plot(ins.ratios.cpu(), ins.scores.mean(0).cpu(), "-", label=f"{reg} Ins")
        ax.plot(ains.ratios.cpu(), ains.scores.mean(0).cpu(), ":", color=line.get_color(),
                label=f"{reg} A-Ins")
    ax.set(xlabel=r"inserted fraction $\gamma$", ylabel="true-class probability", title=title)
    ax.legend(fontsize=7, ncol=2)
    plt.show()


def plot_inserted_images(models: dict, labels, X, Y, x_adv: dict, protocol: str, i: int = 0,
                         fractions=(0.05, 0.2, 0.4, 0.6)) -> None:
    """Fig. 2's images: for each model of ``labels`` (one row), its Grad map of the attacked
    image ``i`` (``x_adv[label]``), then the inputs the insertion game feeds it at each of
    ``fractions`` in that map's order."""
    from robattr.metrics import insertion_inputs

    fig, axes = plt.subplots(len(labels), len(fractions) + 1, figsize=(9, 4), squeeze=False)
    for row, reg in zip(axes, labels):
        amap = grad(models[reg], x_adv[reg][i:i + 1], Y[i:i + 1])
        image = viz.show_map(row[0], reduce_channels(amap, "abs_sum")[0])
        row[0].set_title(f"{reg}: h(x_adv)", fontsize=8)
        for ax, frac in zip(row[1:], fractions):
            shown = insertion_inputs(models[reg], X[i:i + 1], amap, frac, protocol=protocol)
            ax.imshow(viz.to_image(shown[0]), cmap="gray", vmin=0, vmax=1)
            ax.set_title(f"gamma = {frac}", fontsize=8)
    for ax in axes.flat:
        ax.axis("off")
    plt.tight_layout()
    viz.map_colorbar(fig, image, axes[:, 0])
    plt.show()


def plot_attacked_maps(models: dict, X, Y, x_adv: dict, target_map, i: int = 0) -> None:
    """Fig. 3a: image ``i`` and the attack's target, then each model's Grad map of the clean
    image (top) and of its attacked image ``x_adv[label]`` (bottom)."""
    fig, axes = plt.subplots(2, len(models) + 1, figsize=(2 * (len(models) + 1), 4.2))
    axes[0, 0].imshow(X[i, 0].cpu(), cmap="gray")
    axes[0, 0].set_title("x", fontsize=8)
    axes[1, 0].imshow(target_map.cpu(), cmap="gray")
    axes[1, 0].set_title("target h_t", fontsize=8)
    for j, (reg, m) in enumerate(models.items(), start=1):
        image = viz.show_map(axes[0, j], _abs_map(m, X[i:i + 1], Y[i:i + 1]))
        viz.show_map(axes[1, j], _abs_map(m, x_adv[reg][i:i + 1], Y[i:i + 1]))
        axes[0, j].set_title(reg, fontsize=8)
    for ax in axes.flat:
        ax.axis("off")
    plt.tight_layout()
    viz.map_colorbar(fig, image, axes[:, 1:])
    plt.show()


def plot_grad_maps(models: dict, X, Y, n: int = 6) -> None:
    """The Grad maps of the first ``n`` images, one row per model of ``models``."""
    fig, axes = plt.subplots(len(models), n, figsize=(10, 3.6), squeeze=False)
    for row, (label, m) in zip(axes, models.items()):
        maps = reduce_channels(grad(m, X[:n], Y[:n]), "abs_sum")
        for ax, mp in zip(row, maps):
            image = viz.show_map(ax, mp)
            ax.axis("off")
        row[0].set_title(label, fontsize=8, loc="left")
    plt.tight_layout()
    viz.map_colorbar(fig, image, axes)
    plt.show()
