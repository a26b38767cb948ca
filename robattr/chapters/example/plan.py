"""The cost declarations of the example chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import TEST_SIZES
from robattr.cost import Declaration, attack, attr, family, flat, fwd, grads, grads2, pgd, spec


def _digits_saliency_models(p):
    return [spec(p["dataset"], p["arch"], epochs=p["epochs"], seed=p["seed"])]


def _digits_saliency_work(p):
    fam = family(p["dataset"], p["arch"])
    return [grads(fam, p["n_show"], 1, 10, "Grad maps"), fwd(fam, TEST_SIZES.get(p["dataset"], 0))]


def _attribution_methods_models(p):
    return [spec(p["dataset"], p["arch"], epochs=p["epochs"], seed=0)]


def _all_maps(fam, images, n, steps, epochs):
    return flat(attr(fam, images, m) for m in ("grad", "input_x_grad", "guided_backprop", "lrp",
                                               "grad_cam", "deeplift")) + flat(
        attr(fam, images, "integrated_gradients", steps=steps),
        attr(fam, images, "smoothgrad", n_samples=n),
        attr(fam, images, "uniform_grad", n_samples=n),
        attr(fam, images, "ball_smooth", n_samples=n),
        attr(fam, images, "relex", n_noisy=n, epochs=epochs),
        attr(fam, images, "meaningful_perturbation", iterations=epochs))


def _attribution_methods_work(p):
    fam = family(p["dataset"], p["arch"])
    photo = family(shape=(3, p["photo_size"], p["photo_size"]), arch="resnet18", classes=1000)
    return (_all_maps(fam, 1, p["n_samples"], p["ig_steps"], p["relex_epochs"])
            + _all_maps(photo, 1, p["photo_samples"], p["ig_steps"],
                        max(10, p["relex_epochs"] // 5))
            + [grads2(fam, 1, 3, 8, "differentiability check: 8 maps, 24 rows"),
               grads(fam, 8, 340, 10, "IG completeness: 2 CNNs x 5 rules x m = 4..256")])


def _own_losses():
    """The losses the worked example trains: robattr's, without the papers' baselines."""
    from robattr.catalog import BASELINE_LOSSES
    from robattr.train import LOSSES

    return [name for name in LOSSES if name not in BASELINE_LOSSES]


def _attacks_models(p):
    return [spec(p["dataset"], p["arch"], epochs=p["epochs"], seed=0)] + [
        spec(p["dataset"], p["arch"], name, epochs=p["train_epochs"], seed=p["seed"],
             activation="softplus", beta=3.0) for name in _own_losses()]


def _attacks_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    out = flat(attack(fam, 1, p["steps"], surrogate=True, what="five attacks") for _ in range(5))
    for _ in _own_losses():
        out += pgd(fam, n, 10) + [grads(fam, n, 5, what="RPS")]
    out += flat(attack(fam, 1, p["steps"], surrogate=True, what="budgets") for _ in range(4))
    return out


DECLARATIONS = {
    "attacks_and_defenses": Declaration(_attacks_models, _attacks_work),
    "attribution_methods": Declaration(_attribution_methods_models, _attribution_methods_work),
    "digits_saliency": Declaration(_digits_saliency_models, _digits_saliency_work),
}
