"""Accuracy targets: the test accuracy a trained model needs before a claim that compares
*training methods* through it says anything about the methods.

The book's guard policy (CONTRIBUTING.md, "Verdicts"): an accuracy guard applies only to
claims that compare training methods (:func:`robattr.report.verdicts.models_fit`). A bound, a
certificate or a comparison of attributions on one model is judged on the model at hand,
whatever its accuracy, which its scale line shows.

A target is set per dataset, architecture and training method, from a source:

* the papers' own reported accuracies where they give one, read from their transcribed
  tables (:func:`robattr.report.papers.table`), never retyped: 003 Table 1 for its CIFAR-10 LeNet
  and ResNet-18 under each regulariser;
* a cited figure otherwise: LeCun et al. (1998), "Gradient-based learning applied to
  document recognition", for MNIST (LeNet-5 0.95 % test error for a small CNN, a
  300-100 MLP 3.05 %), and Madry et al. (2018), "Towards deep learning models resistant
  to adversarial attacks", for adversarial training of a small CNN on MNIST (98.8 % on
  natural images);
* for adversarial training (``at``) where no source gives its accuracy on the architecture
  (CIFAR-10: no paper the book checks reports a LeNet trained adversarially), standard
  training's reference scaled by the share of natural accuracy adversarial training keeps
  at the model's norm and radius in a cited CIFAR-10 experiment: l-inf (8/255) from Madry
  et al.'s (:data:`AT_KEEPS`: 87.3 % natural accuracy against 95.2 % for standard
  training, as tabulated by Raghunathan et al. 2019, Table 1); l2 from Engstrom et al.'s
  ResNet-50s trained at radii 0.25, 0.5 and 1.0 (:data:`AT_L2_ACCURACY`, interpolated
  linearly in the radius, pixels in [0, 1]), so that a model trained at a radius 1000 times
  smaller is not asked to lose what one trained at radius 1 loses, nor the other way round.
  A smaller network loses more to adversarial training than these wide ResNets (Madry et
  al.'s capacity study), so these targets are on the strict side.

A method without its own entry takes the entry of standard training (``ce``) for the same
dataset and architecture, and the target says so. A dataset or architecture without any
entry has no target (the quick profile's 8×8 digits), and the guard says that too.

The paper's own model is the ceiling: where a paper reports the accuracy of its own model of
a method on the dataset (000 Table 3 for SSR, Madry's training and IG-NORM on CIFAR-10, and
Table 4 per SSR β; training accuracies of its ResNet-20), a reference above it is lowered
to it (:func:`paper_ceiling`), so that the guard never asks more of a model than the paper's
own reached (000's IG-NORM trained to 49.5 %, its SSR at β = 0.9 to 62 %).

The threshold: the medium tier trains CPU-sized budgets (5 epochs where 003 trains 200),
so a model is asked for :data:`SHARE_OF_GAIN` of the reference's gain over chance (a
10-class problem's chance is 10 %): ``least = chance + SHARE_OF_GAIN × (reference −
chance)``. This is a policy, stated once and tested, not a finding.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["SHARE_OF_GAIN", "AT_KEEPS", "AT_L2_ACCURACY", "Target", "target", "judged",
           "paper_ceiling", "CHANCE", "at_keeps"]

#: the share of the reference model's accuracy gain over chance a model must reach
SHARE_OF_GAIN = 0.75
#: chance accuracy of each dataset with a target (10 balanced classes)
CHANCE = {"cifar10": 0.10, "mnist": 0.10}

_LECUN = "LeCun et al. 1998 (Proc. IEEE), test error"
_MADRY = "Madry et al. 2018 (ICLR), natural accuracy of the adversarially trained MNIST CNN"
#: the share of standard training's natural accuracy adversarial training keeps on CIFAR-10
#: (Madry et al. 2018's wide ResNet: 87.3 % against 95.2 %), and its source
AT_KEEPS = (0.873 / 0.952, "Madry et al. 2018 on CIFAR-10: 87.3 % adversarially trained, "
            "95.2 % standard; Raghunathan et al. 2019, Table 1")
#: natural test accuracy of CIFAR-10 ResNet-50s adversarially trained under l2 at each radius
#: (pixels in [0, 1]; 0: standard training), and its source
AT_L2_ACCURACY = ({0.0: 0.9525, 0.25: 0.9277, 0.5: 0.9083, 1.0: 0.8162},
                  "Engstrom et al. 2019, the robustness library's CIFAR-10 l2-robust ResNet-50s: "
                  "95.25 % standard, 92.77 / 90.83 / 81.62 % at radius 0.25 / 0.5 / 1.0")
#: cited figures (dataset, arch, method) -> (accuracy, source); the papers' own come first
_CITED = {
    ("mnist", "cnn", "ce"): (1 - 0.0095, f"{_LECUN} of LeNet-5 (0.95 %)"),
    ("mnist", "mlp", "ce"): (1 - 0.0305, f"{_LECUN} of a 300-100 MLP (3.05 %)"),
    ("mnist", "cnn", "at"): (0.988, _MADRY),
}
#: 003 Table 1's rows (its regulariser names) for robattr's loss names
_JOO_ROWS = {"ce": "CE only", "l2": "l2", "l2_cosd": "l2+Cosd", "hessian": "Hessian",
             "atex": "ATEX", "iga": "IGA"}
_JOO_ARCHS = {"lenet": "LeNet", "resnet18": "ResNet18"}


@dataclass(frozen=True)
class Target:
    """A model's accuracy target: the reference ``accuracy`` and its ``source``, and the
    threshold ``least`` the guard asks for (:data:`SHARE_OF_GAIN` of its gain over chance)."""

    dataset: str
    arch: str
    method: str
    accuracy: float
    source: str

    @property
    def least(self) -> float:
        chance = CHANCE.get(self.dataset, 0.0)
        return chance + SHARE_OF_GAIN * (self.accuracy - chance)

    def text(self) -> str:
        return (f"{100 * self.least:.1f} % ({SHARE_OF_GAIN:.0%} of the way from chance to "
                f"{100 * self.accuracy:.1f} %, {self.source})")

    def met(self, accuracy: float) -> bool:
        """Whether a model of test ``accuracy`` (a share) reaches :attr:`least`."""
        return float(accuracy) >= self.least


def judged(dataset: str, arch: str, method: str, accuracy: float,
           loss: dict | None = None) -> str:
    """One line on a trained model's test ``accuracy`` against its :func:`target`:
    ``"test accuracy 71.0 %, target 67.6 %: met"`` (or ``missed``), or that it has none."""
    t = target(dataset, arch, method, loss)
    acc = f"test accuracy {100 * float(accuracy):.1f} %"
    if t is None:
        return f"{acc}, no accuracy target for {dataset} {arch}"
    return f"{acc}, target {100 * t.least:.1f} %: {'met' if t.met(accuracy) else 'missed'}"


@lru_cache(maxsize=None)
def _paper_entries() -> dict:
    from robattr.report.papers.printed import table

    out = {}
    t = table("joo2023_table1")
    t = t[(t["dataset"] == "CIFAR10") & (t["metric"] == "accuracy")]
    for arch, printed_arch in _JOO_ARCHS.items():
        for method, row in _JOO_ROWS.items():
            hit = t[(t["model"] == printed_arch) & (t["regularizer"] == row)]
            if len(hit) == 1:
                out[("cifar10", arch, method)] = (
                    float(hit["value"].iloc[0]) / 100,
                    f"003 Table 1, {printed_arch} {row} on CIFAR-10")
    return out


#: 000's training names for robattr's loss names
_WANG_ROWS = {"SSR": "ssr", "Madry": "at", "IG-NORM": "ig_norm"}


@lru_cache(maxsize=None)
def _own_models() -> dict:
    """``{(dataset, method, ssr beta or None): (accuracy, source)}``: the accuracies the
    papers report for their own models of a method, read from their tables."""
    from robattr.report.papers.printed import table

    out = {}
    t3 = table("wang2020_table3")
    for r in t3[t3["metric"] == "train_acc_pct"].itertuples():
        out[("cifar10", _WANG_ROWS[r.training], None)] = (
            float(r.value) / 100, f"000 Table 3, {r.training} ({r.training_param}), "
                                  "training accuracy of its ResNet-20 on CIFAR-10")
    t4 = table("wang2020_table4")
    for r in t4[t4["metric"] == "train_acc"].itertuples():
        out[("cifar10", "ssr", float(r.beta))] = (
            float(r.value), f"000 Table 4, SSR beta = {float(r.beta):g}, training accuracy "
                            "of its ResNet-20 on CIFAR-10")
    return out


def paper_ceiling(dataset: str, method: str, loss: dict | None = None) -> tuple | None:
    """``(accuracy, source)`` of the paper's own model of ``method`` on ``dataset`` (for SSR,
    at the β of ``loss["ssr_beta"]`` where the paper gives it), or None."""
    own = _own_models()
    beta = (loss or {}).get("ssr_beta") if method == "ssr" else None
    if beta is not None and (dataset, method, float(beta)) in own:
        return own[(dataset, method, float(beta))]
    return own.get((dataset, method, None))


def target(dataset: str, arch: str, method: str, loss: dict | None = None) -> Target | None:
    """The target of a model trained by ``method`` (with the hyper-parameters ``loss``, the
    zoo configuration's) with architecture ``arch`` on ``dataset``, or ``None`` when neither
    the papers nor a cited figure give one; never above the paper's own model of the method
    (:func:`paper_ceiling`)."""
    t = _reference(str(dataset), str(arch), str(method), loss)
    ceiling = paper_ceiling(str(dataset), str(method), loss) if t is not None else None
    if ceiling is not None and ceiling[0] < t.accuracy:
        return Target(t.dataset, t.arch, t.method, ceiling[0],
                      f"{ceiling[1]}: the paper's own model of the method, its ceiling "
                      f"({100 * t.accuracy:.1f} % otherwise)")
    return t


def at_keeps(loss: dict | None = None) -> tuple[float, str]:
    """``(share, source)``: the share of standard training's natural accuracy that
    adversarial training with the hyper-parameters ``loss`` keeps on CIFAR-10. l2 at radius
    ``loss["eps"]``: :data:`AT_L2_ACCURACY` interpolated linearly (beyond its largest radius,
    the largest radius's share, and the source says so); otherwise (l-inf, or no radius):
    :data:`AT_KEEPS`."""
    loss = loss or {}
    eps = loss.get("eps")
    if str(loss.get("norm", "linf")).lower() != "l2" or not isinstance(eps, (int, float)):
        return AT_KEEPS
    import numpy as np

    if not eps >= 0:
        raise ValueError(f"an l2 training radius must be >= 0, got {eps!r}")
    table, cited = AT_L2_ACCURACY
    radii = sorted(table)
    acc = float(np.interp(float(eps), radii, [table[r] for r in radii]))
    beyond = (f"; radius {eps:.3g} lies beyond the largest the source trains, so its share "
              f"at {radii[-1]:g} is used" if eps > radii[-1] else "")
    return acc / table[0.0], f"{cited}, interpolated at radius {eps:.3g}{beyond}"


def _reference(dataset: str, arch: str, method: str,
               loss: dict | None = None) -> Target | None:
    """:func:`target` before the paper's ceiling."""
    entries = {**_CITED, **_paper_entries()}
    key = (str(dataset), str(arch), str(method))
    if key in entries:
        acc, source = entries[key]
        return Target(*key, acc, source)
    ce = (key[0], key[1], "ce")
    if ce in entries and key[2] == "at" and key[0] == "cifar10":
        acc, source = entries[ce]
        keeps, cited = at_keeps(loss)
        return Target(*key, acc * keeps, f"{source} x {keeps:.3f}, the share adversarial "
                      f"training keeps ({cited})")
    if ce in entries:
        acc, source = entries[ce]
        return Target(*key, acc, f"{source}; no source gives {method} on this architecture, "
                      "so standard training's target applies")
    return None
