"""The theory notebook's checks over many networks: Lemma 3 and Proposition 5 (scaling the
last layer), Appendix B (homogeneity of a ReLU network), Theorem 6 (the cosine bound) and
Fig. 3b (the bound term against the measured criterion).

The single checks are :mod:`robattr.bounds`; what is here runs them on the trained zoo
models and on ``n_random`` random small networks drawn from one NumPy generator (in the
notebook's order, so that every draw is the one the notebook made), and tabulates them.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from torch import nn

__all__ = ["TALLY_COUNTS", "FIG3B_TERMS", "float64_models", "uniform_noise",
           "random_scaling_checks", "scaling_summary", "plot_scaling", "ExpLogit",
           "exp_logit_change", "random_homogeneity_checks", "homogeneity_table", "random_theorem6_cases", "tally_by_eps",
           "eps_means",
           "pool_switch_split", "switch_total", "failure_rates", "smallest_eps_cases",
           "fig3b_curves", "bound_slopes", "by_image", "order_agreement", "equal_norm_gap"]

#: the counts of :func:`robattr.bounds.theorem6_tally` the notebook prints
TALLY_COUNTS = ["cases", "viol_proof_exact", "viol_exact", "viol_exact_sq", "fail_first_order",
                "fail_spectral", "fail_frobenius"]

#: Fig. 3b's curves: (label, column of the cases, only the cases where no pooling switch moves)
FIG3B_TERMS = [
    (r"$\varepsilon\|H\hat\delta\|/\|b\|$ (Fig. 3b bound)", "first_order", False),
    (r"exact $\Gamma^{\ell_2}/\|b\|$", "exact", False),
    (r"measured $\Gamma^{\cos}$ (all)", "cosd", False),
    (r"measured $\Gamma^{\cos}$ (no pooling switch)", "cosd", True),
    (r"$\varepsilon^2\|P_\perp H\hat\delta\|^2/4\|a\|^2$ (no pooling switch)", "second_order", True)]


def float64_models(models: dict, log=print):
    """A notebook's zoo models (``{label: model}``, :func:`~robattr.chapters.joo2023.specs.
    theory_alignment`), each in float64 on the CPU in eval mode, their test accuracies
    printed: ``(label -> Softplus model, the ReLU CE model)``."""
    from robattr.chapters.joo2023.specs import RELU_CE

    trained = {}
    for label, m in models.items():
        if label != RELU_CE:
            trained[label] = m.double().cpu().eval()
            log(f"{label:8s} test accuracy {m.zoo_meta['test_acc']:.3f}")
    relu_model = models[RELU_CE].double().cpu().eval()
    log(f"ReLU CE  test accuracy {relu_model.zoo_meta['test_acc']:.3f}")
    return trained, relu_model


def uniform_noise(X: torch.Tensor, seed: int, levels: int = 16) -> torch.Tensor:
    """Float64 noise uniform in ``±levels/255`` of ``X``'s shape, drawn from ``seed``."""
    u = torch.rand(X.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (2 * u - 1) * levels / 255


def random_scaling_checks(rng: np.random.Generator, n_random: int, alphas) -> list:
    """:func:`robattr.bounds.scaling_check` on ``n_random`` random small MLPs (8 inputs
    each, noise uniform in ±0.1), one frame per network that has a gradient to compare (a
    dead ReLU net has none), its ``kind`` column ``"random <activation>"``."""
    from robattr.bounds import scaling_check
    from robattr.models import sample_random_mlp

    checks = []
    for _ in range(n_random):
        net, d, act, _beta = sample_random_mlp(rng)
        x = torch.from_numpy(rng.standard_normal((8, d)))
        delta = torch.from_numpy(rng.uniform(-0.1, 0.1, (8, d)))
        check = scaling_check(net, x, delta, net(x).argmax(1), alphas, skip_small=1e-6)
        if len(check):
            checks.append(check.assign(kind=f"random {act}"))
    return checks


def scaling_summary(lemma: pd.DataFrame) -> pd.DataFrame:
    """Per kind of network: its (network, α) cases, the worst ℓ2 ratio error and cosd change,
    and how many cases changed a prediction."""
    return lemma.groupby("kind").agg(cases=("alpha", "size"), max_l2_ratio_err=("l2_err", "max"),
                                     max_cosd_change=("cos_err", "max"),
                                     prediction_changed=("pred_same", lambda s: int((~s).sum())))


def plot_scaling(lemma: pd.DataFrame) -> None:
    """The two panels of Lemma 3 and Proposition 5 for the trained models: the mean ℓ2
    criterion against α (log-log) and the mean cosine criterion against α."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for kind, g in lemma[lemma.kind.str.startswith("trained ")].groupby("kind", sort=False):
        axes[0].loglog(g.alpha, g.l2_mean, "o-", ms=3, label=kind.removeprefix("trained "))
        axes[1].semilogx(g.alpha, g.cosd_mean, "o-", ms=3, label=kind.removeprefix("trained "))
    axes[0].set(xlabel=r"last-layer scale $\alpha$", ylabel=r"mean $\Gamma^{\ell_2}$",
                title=r"Lemma 3: $\ell_2$ criterion $\propto \alpha$")
    axes[1].set(xlabel=r"last-layer scale $\alpha$", ylabel=r"mean $\Gamma^{\cos}$",
                title="Prop. 5: cosine criterion is flat")
    axes[1].legend(fontsize=7)
    plt.tight_layout()
    plt.show()


class ExpLogit(nn.Module):
    """phi(f) = exp(f - 5): same normalised gradients as f, a different l2 criterion."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(self.inner(x) - 5.0)


def exp_logit_change(models: dict, X, delta, Y) -> tuple[list[float], np.ndarray]:
    """Under φ = exp (:class:`ExpLogit`): the largest change of the cosine criterion per
    model, and the factor of the ℓ2 criterion per image (all models' images together)."""
    from robattr.bounds import alignment_criteria

    cos_change, l2_factor = [], []
    for model in models.values():
        base = alignment_criteria(model, X, delta, Y)
        new = alignment_criteria(ExpLogit(model), X, delta, Y)
        cos_change.append(float((new["cosd"] - base["cosd"]).abs().max()))
        l2_factor.append((new["l2"] / base["l2"]).numpy())
    return cos_change, np.concatenate(l2_factor)


def random_homogeneity_checks(rng: np.random.Generator, n_random: int,
                              alpha: float = 3.0) -> list:
    """:func:`robattr.bounds.homogeneity_check` on ``n_random`` random ReLU MLPs (16 inputs
    each), their ``model`` column ``"random ReLU MLP"``."""
    from robattr.bounds import homogeneity_check
    from robattr.models import sample_random_mlp

    frames = []
    for _ in range(n_random):
        net, d, _act, _beta = sample_random_mlp(rng, "relu")
        x = torch.from_numpy(rng.standard_normal((16, d)))
        frames.append(homogeneity_check(net, x, alpha).assign(model="random ReLU MLP"))
    return frames


def homogeneity_table(homog: pd.DataFrame, tol: float = 1e-9) -> pd.DataFrame:
    """Per model, layer kind (last or not) and form (printed, corrected): the cases, the
    failures (relative error above ``tol``) and the worst error; marks ``homog.fails``."""
    homog["fails"] = homog.err > tol
    return homog.groupby(["model", "last", "form"]).agg(cases=("err", "size"),
                                                        failures=("fails", "sum"),
                                                        max_rel_err=("err", "max"))


def random_theorem6_cases(rng: np.random.Generator, n_random: int, eps_l2, gen: torch.Generator,
                          power_iters: int) -> pd.DataFrame:
    """:func:`robattr.bounds.theorem6_cases` on ``n_random`` random Softplus MLPs (4 inputs
    each, their predicted class), with the network's β and index as columns."""
    from robattr.bounds import theorem6_cases
    from robattr.models import sample_random_mlp

    rows = []
    for i in range(n_random):
        net, d, _act, b = sample_random_mlp(rng, "softplus")
        x = torch.from_numpy(rng.standard_normal((4, d)))
        df = theorem6_cases(net, x, net(x).argmax(1), eps_l2, gen, power_iters=power_iters)
        rows.append(df.assign(beta=b, net=i))
    return pd.concat(rows, ignore_index=True)


def tally_by_eps(cases: pd.DataFrame) -> pd.DataFrame:
    """:func:`robattr.bounds.theorem6_tally` of the cases at each ε, one row per ε."""
    from robattr.bounds import theorem6_tally

    by_eps = pd.DataFrame({e: theorem6_tally(g) for e, g in cases.groupby("eps_l2")}).T
    by_eps.index.name = "eps_l2"
    return by_eps


def eps_means(t6: dict) -> tuple[dict, dict]:
    """Per model (``label -> Theorem 6 cases``), the means of the cases' columns at each ε:
    over all cases, and over those where no pooling switch moves."""
    means = {label: df.groupby("eps_l2").mean(numeric_only=True) for label, df in t6.items()}
    smooth = {label: df[~df.pool_flip].groupby("eps_l2").mean(numeric_only=True)
              for label, df in t6.items()}
    return means, smooth


def pool_switch_split(t6: dict, tol: float = 1e-9) -> pd.DataFrame:
    """The Theorem 6 cases of each Softplus model (``label -> cases``; ReLU ones left out),
    split by whether a pooling switch moved: cases, failures of the first-order term and the
    worst ratio of the criterion to the term."""
    rows = []
    for label, df in t6.items():
        if label.startswith("ReLU"):
            continue
        for flip, g in df.groupby("pool_flip"):
            fail = g.cosd > g.first_order + tol
            rows.append(dict(model=label, pool_switch_moved=bool(flip), cases=len(g),
                             failures=int(fail.sum()),
                             worst_cosd_over_term=float((g.cosd / g.first_order).max())))
    return pd.DataFrame(rows).set_index(["model", "pool_switch_moved"])


def switch_total(split: pd.DataFrame, column: str, moved: bool) -> int:
    """Sum of a column of :func:`pool_switch_split` over the cases with (``moved``) or
    without a pooling switch; 0 if there are none."""
    if moved not in split.index.get_level_values("pool_switch_moved"):
        return 0
    return int(split.xs(moved, level="pool_switch_moved")[column].sum())


def failure_rates(rand: pd.DataFrame, tol: float = 1e-9) -> pd.DataFrame:
    """The failure rate of the first-order term on the random MLPs, rows ε, columns bins of
    β; adds the columns ``fails`` and ``beta_bin`` to ``rand``."""
    rand["fails"] = rand.cosd > rand.first_order + tol
    rand["beta_bin"] = pd.cut(rand.beta, [0.5, 2, 5, 20])
    rate = rand.pivot_table(index="eps_l2", columns="beta_bin", values="fails", aggfunc="mean",
                            observed=False)
    rate.columns = [f"β in {b}" for b in rate.columns]
    return rate


def smallest_eps_cases(rand: pd.DataFrame, eps: float) -> pd.DataFrame:
    """The random cases at ``eps`` (the smallest ε) where the criterion is defined (both
    gradients nonzero)."""
    small = rand[rand.eps_l2 == eps]
    return small[small.cosd.notna() & (small.grad_norm > 0) & (small.grad_norm_pert > 0)]


def fig3b_curves(means: dict, means_smooth: dict, labels, dataset: str,
                 arch: str) -> pd.DataFrame:
    """Fig. 3b's curves of the models ``labels`` as one long table (model, term, ε, value),
    from their means per ε over all cases (``means``) and over those where no pooling switch
    moves (``means_smooth``)."""
    parts = []
    for label in labels:
        for term, column, no_switch in FIG3B_TERMS:
            m = (means_smooth if no_switch else means)[label][column]
            parts.append(pd.DataFrame({"model": f"{label} model ({dataset} {arch})", "term": term,
                                       "eps_l2": m.index.to_numpy(), "value": m.to_numpy()}))
    return pd.concat(parts, ignore_index=True)


def bound_slopes(means: dict, means_smooth: dict, labels) -> pd.DataFrame:
    """Per model: the slopes on log axes of the criterion (all cases, no switch) and of the
    bound term, and the ratio of the term to the criterion at the smallest and largest ε."""
    from robattr.bounds import log_slope

    rows = {}
    for label in labels:
        g, g0 = means[label], means_smooth[label]
        rows[label] = {"slope cosd (all)": log_slope(g.index, g.cosd),
                       "slope cosd (no switch)": log_slope(g0.index, g0.cosd),
                       "slope bound term": log_slope(g.index, g.first_order),
                       "bound / cosd, smallest eps": float((g.first_order / g.cosd).iloc[0]),
                       "bound / cosd, largest eps": float((g.first_order / g.cosd).iloc[-1])}
    return pd.DataFrame(rows).T


def by_image(cases: pd.DataFrame, column: str) -> pd.DataFrame:
    """Examples x ε table of one column of a trained model's Theorem 6 cases."""
    return cases.pivot(index="example", columns="eps_l2", values=column)


def order_agreement(a: pd.DataFrame, b: pd.DataFrame) -> pd.Series:
    """Per image, averaged over ε: +1 where the bound term orders the two models' cases
    ``a`` and ``b`` as the criterion does, −1 where it does not (0 where undefined)."""
    term = np.sign(by_image(a, "first_order") - by_image(b, "first_order"))
    crit = np.sign(by_image(a, "cosd") - by_image(b, "cosd"))
    return (term * crit).fillna(0).mean(axis=1)


def equal_norm_gap(model: nn.Module, X, delta, Y) -> torch.Tensor:
    """Per image, |Γcos − ‖Δ‖²/(4‖a‖‖b‖)| after ``b`` is rescaled to ``a``'s norm (same
    direction): zero up to rounding, the equality case of the exact bound."""
    from robattr.attributions import grad

    a = grad(model, X, Y).flatten(1)
    b = grad(model, X + delta, Y).flatten(1)
    b_eq = b * (a.norm(dim=1) / b.norm(dim=1))[:, None]
    lhs = (1 - torch.nn.functional.cosine_similarity(a, b_eq, dim=1)) / 2
    rhs = (b_eq - a).norm(dim=1) ** 2 / (4 * a.norm(dim=1) ** 2)
    return (lhs - rhs).abs()
