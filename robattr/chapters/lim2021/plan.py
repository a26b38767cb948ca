"""The cost declarations of the lim2021 chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import NUM_CLASSES
from robattr.chapters.lim2021 import specs
from robattr.cost import Declaration, attack, attr, curve, family, flat, fwd, grads, pgd


def _gradient_explainers(fam, n, p, deeplift=True):
    """SimGrad, SmoothGrad, IntGrad, (DeepLIFT,) Grad-CAM on ``n`` images."""
    out = (attr(fam, n, "grad") + attr(fam, n, "smoothgrad", n_samples=p["sg_samples"])
           + attr(fam, n, "integrated_gradients", steps=p["ig_steps"]))
    if deeplift:
        out += attr(fam, n, "deeplift")
    return out + attr(fam, n, "grad_cam")


def _clean_classes_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    c = NUM_CLASSES.get(p["dataset"], 10)
    k = p["n_class_images"]
    relex = dict(epochs=p["relex_epochs"], n_noisy=p["n_noisy"])
    out = _gradient_explainers(fam, n, p) + attr(fam, n, "relex", **relex)
    out += flat(curve(fam, n, 64, "deletion / preservation") for _ in range(12))
    out += pgd(fam, k, p["pgd_steps"])
    for _ in range(2):                                        # clean and attacked, every class
        out += _gradient_explainers(fam, c * k, p, deeplift=False)
        out += attr(fam, c * k, "relex", **relex) + [fwd(fam, c * k, 5)]
    out += attr(fam, c * k, "relex", **relex) + attr(fam, c, "relex", **relex)
    return out + flat(attr(fam, p.get("n_compare", 0), "relex", what="masking comparison",
                           **relex) for _ in range(2))


def _all_masks(fam, n, p, long=None, mask_iterations=None):
    out = _gradient_explainers(fam, n, p)
    if mask_iterations:
        out += attr(fam, n, "meaningful_perturbation", iterations=mask_iterations)
    if long:
        out += attr(fam, n, "relex", epochs=long, n_noisy=p["n_noisy"])
        out += attr(fam, n, "relex", epochs=p["relex_epochs"], batch=False)
    else:
        out += attr(fam, n, "relex", epochs=p["relex_epochs"], n_noisy=p["n_noisy"])
    return out


def _untargeted_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    out = []
    for _ in range(2):
        out += _all_masks(fam, n, p, p["relex_epochs_long"], p["mask_iterations"])
        for _ in p["eps_paper"]:
            out += pgd(fam, n, p["pgd_steps"]) + [fwd(fam, n, 2)]
            out += _all_masks(fam, n, p, p["relex_epochs_long"], p["mask_iterations"])
            out += [fwd(fam, n, 2, 9, "retrieval")] + flat(curve(fam, n, 64) for _ in range(18))
    return out


def _targeted_work(p):
    fam, n, s = family(p["dataset"], p["arch"]), p["n_eval"], p["attack_steps"]
    out = attr(fam, n, "relex", epochs=p["relex_epochs"], n_noisy=p["n_noisy"])
    rows = {"SimGrad": 1, "SmoothGrad": p["attack_samples"], "IntGrad": p["attack_samples"],
            "GradCAM": 1}
    for attack_name in ("structured", "unstructured"):
        for r in rows.values():
            if attack_name == "structured":
                out.append(grads(fam, n, r, what="target maps"))
            out += attack(fam, n, s, r, surrogate=True, what=f"{attack_name} attack")
    out += pgd(fam, n, s) + _all_masks(fam, 18 * n, p)
    out += flat(curve(fam, n, 1, "retrieval") for _ in range(16 * 6))
    return out + attr(fam, n, "relex", epochs=p["relex_epochs"], n_noisy=p["n_noisy"])


def _theory_relex_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_images"]
    small = family(shape=(1, 1, 16), arch="mlp", classes=5, float64=True)
    g = p["n_grid"]
    rows_dirs = n * (p["n_dirs"] + 1)
    relex = dict(epochs=p["relex_epochs"], n_noisy=p["n_noisy"])

    def thm1(f, rows, repeat=1):
        return [grads(f, rows, 1, repeat * (2 * g + 4), "Thm 1: crossing search"),
                fwd(f, rows, 1, repeat * 30, "Thm 1: bisection")]

    out = thm1(small, 8, 22 * p["n_random"])
    for _ in range(2):
        out += attr(fam, n, "relex", **relex) + thm1(fam, rows_dirs, 3)
        out += [grads(fam, n, 1, 5, "Eq. 7")]
    for _ in p["lambda1_grid"]:
        out += attr(fam, n, "relex", **relex) + thm1(fam, rows_dirs)
    return out + [grads(fam, n, 2, 2 * 2 * 5 * max(1, p["n_dirs"] // 4), "Thm 2")]


DECLARATIONS = {
    "clean_classes": Declaration(lambda p: list(specs.clean_classes(p).values()),
                                 _clean_classes_work),
    "targeted_transfer": Declaration(lambda p: list(specs.targeted_transfer(p).values()),
                                     _targeted_work),
    "theory_relex": Declaration(lambda p: list(specs.theory_relex(p).values()),
                                _theory_relex_work),
    "untargeted": Declaration(lambda p: list(specs.untargeted(p).values()), _untargeted_work),
}
