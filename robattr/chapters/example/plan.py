"""The cost declarations of the example chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import TEST_SIZES
from robattr.chapters.example import specs
from robattr.cost import Declaration, attack, attr, family, flat, fwd, grads, grads2, pgd


def _digits_saliency_work(p):
    fam = family(p["dataset"], p["arch"])
    return [grads(fam, p["n_show"], 1, 10, "Grad maps"), fwd(fam, TEST_SIZES.get(p["dataset"], 0))]


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


def _attacks_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    out = flat(attack(fam, 1, p["steps"], surrogate=True, what="five attacks") for _ in range(5))
    for _ in [k for k in specs.attacks_and_defenses(p) if k != specs.ATTACKED]:   # loss table
        out += pgd(fam, n, 10) + [grads(fam, n, 5, what="RPS")]
    out += flat(attack(fam, 1, p["steps"], surrogate=True, what="budgets") for _ in range(4))
    return out


DECLARATIONS = {
    "attacks_and_defenses": Declaration(lambda p: list(specs.attacks_and_defenses(p).values()),
                                        _attacks_work),
    "attribution_methods": Declaration(lambda p: list(specs.attribution_methods(p).values()),
                                       _attribution_methods_work),
    "digits_saliency": Declaration(lambda p: list(specs.digits_saliency(p).values()),
                                   _digits_saliency_work),
}
