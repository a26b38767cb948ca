"""The rules: a verdict from a run's numbers (see :mod:`robattr.report.verdicts`)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["VERDICTS", "Verdict", "bootstrap_interval", "gap", "not_worse", "combine",
           "COMBINE_RULE", "negate", "exact", "share", "share_cases_needed", "underpowered",
           "share_clustered", "spearman_interval", "rank_agreement", "attack_effective"]

#: The verdicts, and how each is rendered (marks that every text font has, no emoji).
VERDICTS = {
    "holds": "✓ holds",
    "holds partly": "◐ holds partly",
    "does not hold": "✗ does not hold",
    "inconclusive": "≈ inconclusive",
    "not comparable": "— not comparable",
}


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


def _difference(what: str, mean: float, lo: float, hi: float, higher_is_better: bool,
                level: float, over: str) -> str:
    """The mean difference ``what`` (read as a − b) and its interval, as its label reads.
    The rules work on the difference oriented so that > 0 is better (``mean``, ``lo``,
    ``hi``); where lower is better that is b − a, so it is turned back to a − b here and
    the text says that lower is better, rather than print a − b's label beside b − a's
    numbers."""
    if not higher_is_better:
        mean, lo, hi = -mean, -hi, -lo
    return (f"mean {what} = {_fmt(mean)}, {int(level * 100)} % bootstrap interval "
            f"[{_fmt(lo)}, {_fmt(hi)}] over {over}"
            + ("" if higher_is_better else ", lower is better"))


def _signed(x: float) -> str:
    """``x`` with a typographic minus (and no negative zero)."""
    x = float(x) + 0.0
    return f"−{_fmt(-x)}" if x < 0 else _fmt(x)


def _past(x: float, higher_is_better: bool) -> str:
    """"above x" on the oriented scale, as the label reads it: "below −x" where lower is
    better."""
    return f"above {_signed(x)}" if higher_is_better else f"below {_signed(-x)}"


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
    where = _difference(what, mean, lo, hi, higher_is_better, level, str(a.size))
    if a.size >= 2 and lo > min_effect:
        return Verdict("holds", f"{where}: {_past(min_effect, higher_is_better)}")
    if a.size >= 2 and hi < -min_effect:
        return Verdict("does not hold", f"{where}: the other way")
    why = "a single pair has no interval" if a.size < 2 else "the interval holds no effect"
    return Verdict("inconclusive", f"{where}: {why}")


#: :func:`combine`'s rule in words, clause by clause (the notebooks quote it).
COMBINE_RULE = ("parts not comparable (outside a hypothesis or a guard) are set aside and "
                "counted, and every part not comparable gives not comparable; of the parts "
                "judged: every part holds: holds; every part goes the other way: does not hold; "
                "at least half inconclusive: inconclusive; parts that go both ways, or that "
                "hold only partly: holds partly (mixed, with the count each way); otherwise the "
                "decided parts all go one way and make more than half: that way, with the "
                "parts left in the noise counted")


def not_worse(a, b=0.0, *, margin: float, higher_is_better: bool = True, level: float = 0.95,
              what: str = "a − b", n_boot: int = 4000, seed: int = 0) -> Verdict:
    """"``a`` is as good as ``b`` or better" (a paper's "best or comparable"), from paired
    values: a non-inferiority test with a stated ``margin`` (how much worse still counts as
    comparable, e.g. the seed-to-seed spread). The bootstrap interval of the mean
    difference (oriented so that > 0 is better): entirely above ``-margin`` → holds;
    entirely below it → does not hold (worse by more than the margin); otherwise
    inconclusive."""
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    a = _values("a", a)
    b = np.broadcast_to(_values("b", b), a.shape) if np.size(b) == 1 else _values("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must be paired (same length), got {a.size} and {b.size}")
    d = (a - b) if higher_is_better else (b - a)
    lo, hi = bootstrap_interval(d, level=level, n_boot=n_boot, seed=seed)
    where = _difference(what, float(d.mean()), lo, hi, higher_is_better, level, str(a.size))
    edge = _signed(-margin if higher_is_better else margin)
    if a.size < 2:
        return Verdict("inconclusive", f"{where}: a single pair has no interval")
    if lo > -margin:
        return Verdict("holds", f"{where}: {_past(-margin, higher_is_better)}, the margin of "
                       "comparable")
    if hi < -margin:
        return Verdict("does not hold", f"{where}: worse by more than the margin {_fmt(margin)}")
    return Verdict("inconclusive", f"{where}: the interval holds {edge}, the margin "
                   "of comparable")


def combine(verdicts: Sequence[Verdict], *, what: str = "cells") -> Verdict:
    """Several verdicts (the parts of a claim: cells of a table, metrics, pairs) into one,
    by a rule that is symmetric: swapping "holds" and "does not hold" in the parts mirrors
    the verdict (:data:`COMBINE_RULE`).

    A part that is "not comparable" (a hypothesis it is stated under fails, a guard withholds
    it) tests nothing, so it is set aside and counted in the rule; it can neither dilute the
    parts that were judged into "inconclusive" nor decide anything. Every part not
    comparable: not comparable. Of the parts judged:

    * holds: every part holds; does not hold: every part goes the other way;
    * inconclusive: at least half of the parts are inconclusive;
    * holds partly (*mixed*): some parts hold and some go the other way, or some part
      itself holds only partly; the rule names how many go each way;
    * otherwise every decided part goes one way (holds, or does not hold) and the decided
      parts make more than half: that way, with the undecided parts counted in the rule.
    """
    verdicts = list(verdicts)
    if not verdicts or not all(isinstance(v, Verdict) for v in verdicts):
        raise ValueError("combine needs a non-empty list of Verdicts")
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICTS}
    aside = counts["not comparable"]
    n = len(verdicts) - aside
    held, failed, partly = counts["holds"], counts["does not hold"], counts["holds partly"]
    noise = counts["inconclusive"]
    tally = (f"{held} of {len(verdicts)} {what} hold, {partly} partly, {failed} do not, "
             f"{noise} inconclusive")
    if aside:
        tally += f", {aside} not comparable"
    if n == 0:
        return Verdict("not comparable", f"{tally}: no {_singular(what)} could be judged")
    judged = " judged" if aside else ""
    if aside:
        tally += f" (set aside: judged on the other {n})"
    if held == n:
        return Verdict("holds", f"{tally}: every{judged} {_singular(what)} holds")
    if failed == n:
        return Verdict("does not hold",
                       f"{tally}: every{judged} {_singular(what)} goes the other way")
    if noise >= n / 2:
        return Verdict("inconclusive", f"{tally}: at least half of the {what}{judged} are "
                       "within the noise")
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


def negate(verdict: Verdict, what: str) -> Verdict:
    """The verdict on "not ``what``", from the verdict on ``what``: "holds" and "does not
    hold" swap, the others stay (a claim that X is *not* better is refuted exactly where X
    is shown better). The rule keeps what was measured."""
    if not isinstance(verdict, Verdict):
        raise TypeError(f"verdict must be a Verdict, got {type(verdict).__name__}")
    swapped = {"holds": "does not hold", "does not hold": "holds"}
    return Verdict(swapped.get(verdict.verdict, verdict.verdict),
                   f"the opposite claim, {what}: {verdict.verdict} ({verdict.rule})")


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


def underpowered(n: int, at_least: float, *, claim: str = "the claim",
                 unit: str = "distinct images") -> str | None:
    """Before a run, the power of a share claim: ``None`` when ``n`` independent cases
    (distinct images) could confirm a share of ``at_least`` if every one of them passed
    (:func:`share_cases_needed`); otherwise a sentence saying that ``claim`` is underpowered,
    so that its verdict can be at most inconclusive, and how many it needs."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    need = share_cases_needed(at_least, 0.95) if at_least < 1 else None
    if need is not None and n >= need:
        return None
    how = f"at least {need}" if need else "a count of violations (verdicts.exact) instead"
    return (f"Underpowered: {claim} (on {int(n)} {unit}): a share of {_fmt(at_least)} needs "
            f"{how} to be confirmed even if every case passed, so the verdict can be at most "
            "inconclusive.")


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


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row pair of ``a`` and ``b`` (2-D, one sample per row; average
    ranks for ties); NaN where a row of either is constant (no ranking, no ρ)."""
    from scipy import stats

    ra, rb = (stats.rankdata(v, axis=1) for v in (a, b))
    ra, rb = ra - ra.mean(1, keepdims=True), rb - rb.mean(1, keepdims=True)
    den = np.sqrt((ra ** 2).sum(1) * (rb ** 2).sum(1))
    ok = den > 0
    rho = np.full(a.shape[0], np.nan)
    rho[ok] = np.clip((ra * rb).sum(1)[ok] / den[ok], -1.0, 1.0)
    return rho


def spearman_interval(a, b, *, level: float = 0.95, n_boot: int = 4000,
                      seed: int = 0) -> tuple[float, float, float, int]:
    """Spearman's ρ between paired values ``a`` and ``b`` (one pair per unit: a model, an
    image) and its percentile bootstrap interval over the units: each resample draws whole
    pairs ``(a_i, b_i)`` with replacement and recomputes ρ on them, so every resampled ρ,
    and the interval, lies in [−1, 1]. A resample in which ``a`` or ``b`` is constant has
    no ranking and no ρ, and is left out. Returns ``(rho, lo, hi, n_left_out)``; raises
    ``ValueError`` when ``a`` or ``b`` itself is constant."""
    a, b = _values("a", a), _values("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must be paired (same length), got {a.size} and {b.size}")
    if a.size < 2:
        raise ValueError(f"a rank correlation needs at least 2 pairs, got {a.size}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    for name, v in (("a", a), ("b", b)):
        if np.ptp(v) == 0:
            raise ValueError(f"{name} is constant: it has no ranking")
    rho = float(_spearman_rows(a[None], b[None])[0])
    pick = np.random.default_rng(seed).integers(0, a.size, size=(n_boot, a.size))
    boot = _spearman_rows(a[pick], b[pick])
    kept = boot[np.isfinite(boot)]
    if kept.size == 0:
        return rho, rho, rho, int(n_boot)
    lo, hi = np.quantile(kept, [(1 - level) / 2, (1 + level) / 2])
    return rho, float(lo), float(hi), int(n_boot - kept.size)


def rank_agreement(a, b, *, level: float = 0.95, what: str = "a, b", unit: str = "units",
                   min_units: int = 3, n_boot: int = 4000, seed: int = 0) -> Verdict:
    """"``a`` and ``b`` rank the units alike" (two evaluations of the same models, say):
    Spearman's ρ and its bootstrap interval over the units (:func:`spearman_interval`,
    which resamples whole pairs and recomputes ρ). Entirely above 0 → holds (they agree);
    entirely below 0 → does not hold (they rank the units the opposite way); otherwise
    inconclusive. Fewer than ``min_units`` units give no interval worth the name (two
    units always have ρ = ±1), hence inconclusive."""
    rho, lo, hi, left_out = spearman_interval(a, b, level=level, n_boot=n_boot, seed=seed)
    n = _values("a", a).size
    dropped = (f"; {left_out} of {n_boot} resamples left out (a side constant, no rho)"
               if left_out else "")
    where = (f"Spearman rho({what}) = {_fmt(rho)}, {int(level * 100)} % bootstrap interval "
             f"(resampling the {unit}, rho recomputed) [{_fmt(lo)}, {_fmt(hi)}] over {n} "
             f"{unit}{dropped}")
    if n < min_units:
        return Verdict("inconclusive", f"{where}: fewer than {min_units} {unit} give no interval")
    if lo > 0:
        return Verdict("holds", f"{where}: above 0, they agree")
    if hi < 0:
        return Verdict("does not hold", f"{where}: below 0, they rank the {unit} the other way")
    return Verdict("inconclusive", f"{where}: the interval holds 0")


def attack_effective(attacked, random, *, level: float = 0.95, n_boot: int = 4000,
                     seed: int = 0) -> Verdict | None:
    """The guard of a robustness claim. ``attacked`` and ``random`` are how far the maps
    moved (paired per image; larger = moved more) under the attack and under random noise
    of the same size. ``None`` when the attack moved them significantly more (go on with
    the claim's own rule); otherwise the attack is ineffective at this scale, the claim
    (or cell) is not tested there, and the verdict is "not comparable", saying so
    (:func:`combine` sets such a cell aside rather than reading it as noise, so an
    ineffective attack on some cells can neither hide nor dilute the others)."""
    v = gap(attacked, random, level=level, what="attacked − random change", n_boot=n_boot,
            seed=seed)
    if v.verdict == "holds":
        return None
    return Verdict("not comparable", f"the attack is ineffective at this scale, so there is "
                   f"nothing to resist ({v.rule})")
