"""Verdicts on the papers' claims, computed from a run's numbers by stated rules.

A notebook never writes a verdict. It hands its numbers to a rule, and the rule returns a
:class:`Verdict`: one of :data:`VERDICTS` with a sentence that states the rule and the
numbers that decided it, uncertainty included. :func:`robattr.papers.claim` renders it
with the run's scale (dataset and input size, model, how many images or cases, profile)
and records it, so the book's Verdicts page lists every claim of a build.

The rules (each can return every outcome it names; ``tests/test_verdicts.py`` reaches each):

* :func:`gap`: paired values (one per image, seed or cell), "a is better than b": the
  bootstrap interval of the mean difference decides holds / does not hold /
  inconclusive (the interval holds 0);
* :func:`combine`: several verdicts (cells of a table) into one, by a symmetric rule
  (:data:`COMBINE_RULE`): swapping "holds" and "does not hold" in the parts mirrors it;
* :func:`exact`: an exact statement checked on ``n`` cases: holds with 0 violations,
  does not hold otherwise;
* :func:`share`: "at least a share ``p`` of the cases": the Wilson interval of the
  observed share against ``p`` (and it says when ``n`` is too small for "holds" to be
  reachable at all: :func:`share_cases_needed`);
* :func:`share_clustered`: the same share when cases come in correlated groups (one
  image under several models or budgets): a cluster bootstrap over whole images;
* :func:`attack_effective`: the guard of a robustness claim: when the attacked maps move
  no more than under random noise of the same size, the attack is ineffective at this
  scale and the claim is inconclusive, whatever the method;
* :func:`within_hypothesis`: the guard of a statement made under a hypothesis: when the
  run's models break it, the statement is not tested by the run, and its verdict is not
  comparable, whatever the numbers (which the rule still states);
* :func:`models_fit`: the guard of a claim that compares *training methods* through trained
  models, and only of such a claim: when a model falls short of its accuracy target (per
  dataset, architecture and method, with its source: :mod:`robattr.targets`), the
  difference may be the training budget rather than the method, and the verdict is not
  comparable (the rule still states what was measured). Bounds, certificates and
  comparisons of attributions on one model are judged on the model at hand.

:func:`print_cells` prints the cells a combined verdict rests on (a notebook's evidence).
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["VERDICTS", "Verdict", "gap", "combine", "COMBINE_RULE", "exact", "share",
           "share_cases_needed", "share_clustered", "attack_effective",
           "within_hypothesis", "models_fit",
           "Scale", "set_scale", "training_summary", "current_scale", "PROFILE_ENV", "print_cells"]

#: The verdicts, and how each is rendered (marks that every text font has, no emoji).
VERDICTS = {
    "holds": "✓ holds",
    "holds partly": "◐ holds partly",
    "does not hold": "✗ does not hold",
    "inconclusive": "≈ inconclusive",
    "not comparable": "— not comparable",
}

#: Set by the pipeline for the kernel: the profile a notebook runs in (``quick``,
#: ``quick+2`` when two parameters differ from the profile's values).
PROFILE_ENV = "ROBATTR_PROFILE"


@dataclass(frozen=True)
class Verdict:
    """A rule's outcome: ``verdict`` (a key of :data:`VERDICTS`) and ``rule``, one sentence
    with the rule and the numbers (and their uncertainty) that decided it."""

    verdict: str
    rule: str

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {list(VERDICTS)}, got {self.verdict!r}")

    @property
    def holds(self) -> bool:
        """Whether the rule found the claim to hold (a notebook branches on this rather
        than on a verdict word)."""
        return self.verdict == "holds"

    @property
    def fails(self) -> bool:
        """Whether the rule found the claim not to hold ("does not hold"); neither
        :attr:`holds` nor this: partly, inconclusive or not comparable."""
        return self.verdict == "does not hold"


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _values(name: str, v) -> np.ndarray:
    arr = np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty: a verdict needs at least one value")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds non-finite values")
    return arr


def bootstrap_interval(d, *, level: float = 0.95, n_boot: int = 4000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``d`` (resampling its entries)."""
    d = _values("d", d)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if d.size == 1:
        return float(d[0]), float(d[0])
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def gap(a, b=0.0, *, higher_is_better: bool = True, level: float = 0.95,
        min_effect: float = 0.0, what: str = "a − b", n_boot: int = 4000,
        seed: int = 0) -> Verdict:
    """"``a`` is better than ``b``", from paired values (one per image, seed or cell;
    ``b`` may be a number). The mean difference (oriented so that > 0 is better) and its
    bootstrap interval: above ``min_effect`` entirely → holds; below ``-min_effect``
    entirely → does not hold; otherwise inconclusive (the effect is within the noise).
    One pair gives no interval, hence no verdict but inconclusive."""
    a = _values("a", a)
    b = np.broadcast_to(_values("b", b), a.shape) if np.ndim(b) == 0 or np.size(b) == 1 \
        else _values("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must be paired (same length), got {a.size} and {b.size}")
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0, got {min_effect!r}")
    d = (a - b) if higher_is_better else (b - a)
    mean = float(d.mean())
    lo, hi = bootstrap_interval(d, level=level, n_boot=n_boot, seed=seed)
    sign = "" if higher_is_better else " (lower is better, so b − a)"
    where = (f"mean {what}{sign} = {_fmt(mean)}, {int(level * 100)} % bootstrap interval "
             f"[{_fmt(lo)}, {_fmt(hi)}] over {a.size}")
    if a.size >= 2 and lo > min_effect:
        return Verdict("holds", f"{where}: above {_fmt(min_effect)}")
    if a.size >= 2 and hi < -min_effect:
        return Verdict("does not hold", f"{where}: the other way")
    why = "a single pair has no interval" if a.size < 2 else "the interval holds no effect"
    return Verdict("inconclusive", f"{where}: {why}")


#: :func:`combine`'s rule in words, clause by clause (the notebooks quote it).
COMBINE_RULE = ("every part holds: holds; every part goes the other way: does not hold; "
                "more than half within the noise (inconclusive or not comparable): "
                "inconclusive; parts that go both ways, or that hold only partly: holds "
                "partly (mixed, with the count each way); otherwise the decided parts all go "
                "one way and make at least half: that way, with the parts left in the noise "
                "counted")


def combine(verdicts: Sequence[Verdict], *, what: str = "cells") -> Verdict:
    """Several verdicts (the parts of a claim: cells of a table, metrics, pairs) into one,
    by a rule that is symmetric: swapping "holds" and "does not hold" in the parts mirrors
    the verdict (:data:`COMBINE_RULE`).

    * holds: every part holds; does not hold: every part goes the other way;
    * inconclusive: more than half of the parts are inconclusive or not comparable;
    * holds partly (*mixed*): some parts hold and some go the other way, or some part
      itself holds only partly; the rule names how many go each way;
    * otherwise every decided part goes one way (holds, or does not hold) and the decided
      parts make at least half: that way, with the undecided parts counted in the rule.
    """
    verdicts = list(verdicts)
    if not verdicts or not all(isinstance(v, Verdict) for v in verdicts):
        raise ValueError("combine needs a non-empty list of Verdicts")
    n = len(verdicts)
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICTS}
    held, failed, partly = counts["holds"], counts["does not hold"], counts["holds partly"]
    noise = counts["inconclusive"] + counts["not comparable"]
    tally = (f"{held} of {n} {what} hold, {partly} partly, {failed} do not, "
             f"{counts['inconclusive']} inconclusive")
    if counts["not comparable"]:
        tally += f", {counts['not comparable']} not comparable"
    if held == n:
        return Verdict("holds", f"{tally}: every {_singular(what)} holds")
    if failed == n:
        return Verdict("does not hold", f"{tally}: every {_singular(what)} goes the other way")
    if noise > n / 2:
        return Verdict("inconclusive", f"{tally}: most {what} are within the noise")
    if (held and failed) or partly:
        return Verdict("holds partly", f"{tally}: mixed, the {what} go both ways")
    if held:
        return Verdict("holds", f"{tally}: every decided {_singular(what)} holds, "
                       f"{noise} within the noise")
    return Verdict("does not hold", f"{tally}: every decided {_singular(what)} goes the other "
                   f"way, {noise} within the noise")


_PREPOSITION = re.compile(r"\s(?:of|with|against|for|in|on|per|at|under)\s")
_IRREGULAR = {"radii": "radius", "indices": "index", "matrices": "matrix", "hypotheses": "hypothesis"}


def _singular(what: str) -> str:
    """The singular of a plural noun phrase, for "every <one> holds": its head noun, the last
    word before any preposition, loses its plural ("comparisons with the other models" ->
    "comparison with the other models"); a leading parenthesised tuple stays as it is, and
    the words after it are treated the same way ("(T, model) cells" -> "(T, model) cell")."""
    if what.startswith("("):
        close = what.find(")") + 1
        rest = what[close:] if close else ""
        return what[:close] + " " + _singular(rest.lstrip()) if rest.strip() else what
    m = _PREPOSITION.search(what)
    head, tail = (what[:m.start()], what[m.start():]) if m else (what, "")
    *rest, last = head.split(" ")
    if last in _IRREGULAR:
        last = _IRREGULAR[last]
    elif last.endswith(("sses", "xes", "ches", "shes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith("ss"):
        last = last[:-1]
    return " ".join([*rest, last]) + tail


def exact(violations: int, n: int, *, what: str = "cases") -> Verdict:
    """An exact statement checked on ``n`` cases: holds with 0 violations, else does not
    hold (one counterexample refutes it)."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1 (cases checked), got {n!r}")
    if isinstance(violations, bool) or int(violations) != violations or not 0 <= violations <= n:
        raise ValueError(f"violations must be an integer in [0, n], got {violations!r}")
    tally = f"{int(violations)} violation{'' if violations == 1 else 's'} in {int(n)} {what}"
    return Verdict("holds" if violations == 0 else "does not hold", tally)


def _wilson(k: int, n: int, level: float) -> tuple[float, float]:
    from scipy.stats import norm

    z = float(norm.ppf((1 + level) / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k: int, n: int, *, at_least: float, level: float = 0.95,
          what: str = "cases") -> Verdict:
    """"At least a share ``at_least`` of the cases": ``k`` of ``n`` did. The Wilson
    interval of ``k / n``: entirely at or above ``at_least`` → holds; entirely below →
    does not hold; otherwise inconclusive."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(k, bool) or int(k) != k or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in [0, n], got {k!r}")
    if not 0 < at_least <= 1:
        raise ValueError(f"at_least must be in (0, 1], got {at_least!r}")
    lo, hi = _wilson(int(k), int(n), level)
    where = (f"{int(k)} of {int(n)} {what} ({_fmt(k / n)}), {int(level * 100)} % Wilson "
             f"interval [{_fmt(lo)}, {_fmt(hi)}] against {_fmt(at_least)}")
    if lo >= at_least:
        return Verdict("holds", where)
    if hi < at_least:
        return Verdict("does not hold", where)
    if _wilson(int(n), int(n), level)[0] < at_least:
        need = (f"at least {share_cases_needed(at_least, level)}" if at_least < 1 else
                "a count of violations instead (verdicts.exact)")
        return Verdict("inconclusive", f"{where}: with {int(n)} {what} even {int(n)} of "
                       f"{int(n)} could not confirm it (that needs {need})")
    return Verdict("inconclusive", where)


def share_cases_needed(at_least: float, level: float = 0.95) -> int:
    """The fewest cases with which :func:`share` can return "holds" at all (all of them
    passing): below it, the rule can only say "does not hold" or "inconclusive"."""
    if not 0 < at_least < 1:
        raise ValueError(f"at_least must be in (0, 1), got {at_least!r}")
    n = 1
    while _wilson(n, n, level)[0] < at_least:
        n *= 2
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _wilson(mid, mid, level)[0] >= at_least else (mid, hi)
    return hi


def share_clustered(hits, groups, *, at_least: float, level: float = 0.95,
                    n_boot: int = 4000, seed: int = 0, what: str = "cases",
                    group_unit: str = "images") -> Verdict:
    """"At least a share ``at_least`` of the cases", when cases come in correlated groups
    (several models, budgets or attacks on one image): ``hits[i]`` says whether case ``i``
    passed and ``groups[i]`` which image it belongs to. The interval resamples whole
    groups (a cluster bootstrap of the pooled share), so an image seen in many cases weighs
    as one independent draw, and the sentence names the number of distinct groups.
    Entirely at or above ``at_least`` → holds, provided there are enough images for a
    Wilson interval over them to confirm it (:func:`share_cases_needed`: when every image
    passes, the bootstrap has no spread); entirely below → does not hold; otherwise
    inconclusive."""
    hits = _values("hits", hits)
    if not np.isin(hits, (0.0, 1.0)).all():
        raise ValueError("hits must be 0/1 (or booleans), one per case")
    groups = np.asarray(groups).ravel()
    if groups.shape != hits.shape:
        raise ValueError(f"hits and groups must have one entry per case, got {hits.size} "
                         f"and {groups.size}")
    if not 0 < at_least <= 1:
        raise ValueError(f"at_least must be in (0, 1], got {at_least!r}")
    _, inverse = np.unique(groups, return_inverse=True)
    g = int(inverse.max()) + 1
    k_g = np.bincount(inverse, weights=hits, minlength=g)
    n_g = np.bincount(inverse, minlength=g).astype(float)
    share = float(k_g.sum() / n_g.sum())
    if g == 1:
        lo = hi = share
    else:
        rng = np.random.default_rng(seed)
        pick = rng.integers(0, g, size=(n_boot, g))
        boot = k_g[pick].sum(1) / n_g[pick].sum(1)
        lo, hi = (float(q) for q in np.quantile(boot, [(1 - level) / 2, (1 + level) / 2]))
    where = (f"{int(hits.sum())} of {hits.size} {what} ({_fmt(share)}) on {g} distinct "
             f"{group_unit}, {int(level * 100)} % cluster-bootstrap interval (resampling "
             f"{group_unit}) [{_fmt(lo)}, {_fmt(hi)}] against {_fmt(at_least)}")
    if g < 2:
        return Verdict("inconclusive", f"{where}: one {_singular(group_unit)} gives no interval")
    if lo >= at_least:
        # when every image passes the bootstrap has no spread: as independent draws, g
        # images confirm the share only as a Wilson interval over them would
        need = share_cases_needed(at_least, level) if at_least < 1 else None
        if need is None or g < need:
            return Verdict("inconclusive", f"{where}: but {g} {group_unit} could not confirm "
                           f"a share of {_fmt(at_least)} even if all passed (that needs "
                           + (f"at least {need})" if need else "a count of violations)"))
        return Verdict("holds", where)
    if hi < at_least:
        return Verdict("does not hold", where)
    return Verdict("inconclusive", where)


def attack_effective(attacked, random, *, level: float = 0.95, n_boot: int = 4000,
                     seed: int = 0) -> Verdict | None:
    """The guard of a robustness claim. ``attacked`` and ``random`` are how far the maps
    moved (paired per image; larger = moved more) under the attack and under random noise
    of the same size. ``None`` when the attack moved them significantly more (go on with
    the claim's own rule); otherwise an inconclusive verdict saying the attack is
    ineffective at this scale."""
    v = gap(attacked, random, level=level, what="attacked − random change", n_boot=n_boot,
            seed=seed)
    if v.verdict == "holds":
        return None
    return Verdict("inconclusive", f"the attack is ineffective at this scale ({v.rule})")


def within_hypothesis(verdict: Verdict, hypothesis: str, broken: str | None) -> Verdict:
    """The guard of a statement that the paper makes under ``hypothesis`` (e.g. "a
    twice-differentiable classifier"). ``broken`` says how the run's models break it
    (:func:`robattr.models.not_twice_differentiable`), or is ``None`` when they meet it.
    Met: ``verdict`` unchanged. Broken: "not comparable", since a statement checked
    outside its hypothesis is not tested, and the rule keeps what was measured."""
    if not isinstance(verdict, Verdict):
        raise TypeError(f"verdict must be a Verdict, got {type(verdict).__name__}")
    if not hypothesis or not str(hypothesis).strip():
        raise ValueError("hypothesis must name the statement's hypothesis")
    if broken is None:
        return verdict
    return Verdict("not comparable",
                   f"outside the statement's hypothesis ({hypothesis}): the models have {broken}; "
                   f"measured: {verdict.rule}")


def _shortfalls(models) -> list[str]:
    """The zoo models among ``models`` below their accuracy target
    (:func:`robattr.targets.target`), one phrase each."""
    from robattr.targets import target

    short = []
    for m in models:
        meta = getattr(m, "zoo_meta", None)
        if not isinstance(meta, dict) or "test_acc" not in meta:
            continue
        cfg = meta.get("config", {})
        t = target(cfg.get("dataset"), cfg.get("arch"), cfg.get("method", "ce"))
        if t is not None and float(meta["test_acc"]) < t.least:
            short.append(f"{cfg.get('method', '?')} {cfg.get('arch', '')} on {cfg.get('dataset')}: "
                         f"{100 * float(meta['test_acc']):.1f} % < {t.text()}")
    return short


def models_fit(verdict: Verdict, models) -> Verdict:
    """The accuracy guard, for a claim that **compares training methods** through trained
    ``models`` (zoo models, whose ``zoo_meta`` records dataset, architecture, method and
    test accuracy), and only for such a claim: a bound, a certificate or a comparison of
    attributions on one model is judged on the model at hand (the book's guard policy,
    CONTRIBUTING.md). Every model at or above its target (:func:`robattr.targets.target`,
    per dataset, architecture and method, with its source; a model without a target passes):
    ``verdict`` unchanged. Otherwise "not comparable", naming each model below its target
    and the target's source; the rule keeps what was measured. A model without zoo metadata
    cannot be judged and leaves the verdict unchanged."""
    if not isinstance(verdict, Verdict):
        raise TypeError(f"verdict must be a Verdict, got {type(verdict).__name__}")
    models = [models] if hasattr(models, "parameters") else list(models)
    short = _shortfalls(models)
    if not short:
        return verdict
    return Verdict("not comparable",
                   f"a comparison of training methods on models below their accuracy targets "
                   f"({'; '.join(short)}): the difference may be the training budget, not the "
                   f"method; measured: {verdict.rule}")


# --------------------------------------------------------------------------- scale
@dataclass(frozen=True)
class Scale:
    """Where a verdict comes from: dataset and input size, model, how many items."""

    dataset: str = ""
    model: str = ""
    n: int | None = None
    unit: str = "images"
    #: the trained models' quality and budget (:func:`training_summary`), or "" when the
    #: claim rests on no trained model (a synthetic case says so in ``model``)
    trained: str = ""

    def text(self, profile: str | None = None) -> str:
        from robattr import catalog

        parts = []
        if self.dataset:
            shape = catalog.SHAPES.get(self.dataset)
            size = f" {shape[1]}×{shape[2]}" if shape else ""
            parts.append(f"{self.dataset}{size}")
        if self.model:
            parts.append(self.model)
        if self.trained:
            parts.append(self.trained)
        if self.n is not None:
            unit = self.unit
            if self.n == 1 and unit.isalpha():       # one word: "1 image", "1 class"
                unit = unit[:-2] if unit.endswith("sses") else unit.removesuffix("s")
            parts.append(f"{self.n} {unit}")
        profile = profile or os.environ.get(PROFILE_ENV)
        parts.append(f"profile {profile}" if profile else "run outside the pipeline")
        return ", ".join(parts)


_SCALE = [Scale()]


def _span(values, fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def training_summary(models) -> str:
    """What a claim on trained models must show beside its verdict: their clean test
    accuracy and training budget, read from the zoo's metadata (``model.zoo_meta``), e.g.
    ``"test accuracy 38.5 %, 3 epochs on 1000 images"`` or, for several models,
    ``"test accuracy 35–41 % (4 models), 3 epochs on 1000 images, 4 below their accuracy
    target"`` (:func:`robattr.targets.target`, :func:`models_fit`). Models
    without zoo metadata (built in the notebook) are counted as such."""
    models = [models] if hasattr(models, "parameters") else list(models)
    if not models:
        raise ValueError("training_summary needs at least one model")
    metas = [getattr(m, "zoo_meta", None) for m in models]
    known = [m for m in metas if isinstance(m, dict) and "test_acc" in m]
    if not known:
        plural = "s" * (len(models) > 1)
        return f"{len(models)} model{plural} not from the zoo (no recorded accuracy)"
    acc = _span([100 * float(m["test_acc"]) for m in known], lambda v: f"{v:.1f}")
    trained = [m for m in known if "epochs" in m.get("config", {})]
    count = f" ({len(known)} models)" if len(known) > 1 else ""
    text = f"test accuracy {acc} %{count}"
    if trained:
        epochs = _span([int(m["config"]["epochs"]) for m in trained], str)
        images = _span([int(m.get("train_images") or 0) for m in trained], str)
        text += f", {epochs} epochs on {images} images"
    if len(trained) < len(known):         # loaded from weights the user gave, not trained here
        text += f", {len(known) - len(trained)} from given weights"
    if len(known) < len(models):
        text += f", and {len(models) - len(known)} not from the zoo"
    short = _shortfalls(models)
    if short:
        text += f", {len(short)} below {'its' if len(short) == 1 else 'their'} accuracy target"
    return text


def set_scale(dataset: str = "", model: str = "", n: int | None = None,
              unit: str = "images", *, models=None) -> Scale:
    """The scale every later claim of this notebook shows (one call in the setup cell);
    a claim may override ``n`` or ``unit``. ``models``: the trained model(s) the claims
    rest on, whose test accuracy and training budget the line then shows
    (:func:`training_summary`); leave it out only for a synthetic case, which ``model``
    then names."""
    if n is not None and (isinstance(n, bool) or int(n) != n or n < 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    trained = "" if models is None else training_summary(models)
    _SCALE[0] = Scale(str(dataset), str(model), None if n is None else int(n), unit, trained)
    return _SCALE[0]


def current_scale() -> Scale:
    return _SCALE[0]


def print_cells(title: str, cells) -> None:
    """Print ``title``, then one line per cell of ``cells`` (a mapping ``name -> Verdict``):
    the verdict and the rule that decided it, the evidence a combined claim rests on."""
    if not hasattr(cells, "items"):
        raise ValueError(f"cells must be a mapping name -> Verdict, got {type(cells).__name__}")
    print(title)
    for name, v in cells.items():
        if not isinstance(v, Verdict):
            raise ValueError(f"cell {name!r} is not a Verdict: {v!r}")
        print(f"  {name}: {v.verdict} ({v.rule})")
