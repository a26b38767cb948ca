"""The guards: when a run's numbers cannot decide a claim, and the seed rule (see
:mod:`robattr.report.verdicts`)."""
from __future__ import annotations

import math

from robattr.report.verdicts.rules import Verdict, _fmt, _values

__all__ = ["within_hypothesis", "models_fit", "MIN_SEEDS", "seed_spread", "beyond_seeds"]


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
        t = target(cfg.get("dataset"), cfg.get("arch"), cfg.get("method", "ce"), cfg.get("loss"))
        if t is not None and float(meta["test_acc"]) < t.least:
            short.append(f"{cfg.get('method', '?')} {cfg.get('arch', '')} on {cfg.get('dataset')}: "
                         f"{100 * float(meta['test_acc']):.1f} % < {t.text()}{_budget(meta)}")
    return short


def _budget(meta: dict) -> str:
    """The training budget a model below its target had, from its zoo metadata: ", after 5
    epochs on 50000 images, the profile's budget" (empty when the metadata does not say)."""
    epochs = meta.get("config", {}).get("epochs")
    if epochs is None:
        return ""
    images = meta.get("train_images")
    on = f" on {int(images)} images" if images else ""
    return f", after {int(epochs)} epoch{'' if int(epochs) == 1 else 's'}{on}, the profile's budget"


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


#: the fewest seeds of one model from which a seed-to-seed spread is measured
MIN_SEEDS = 3


def seed_spread(values) -> float:
    """The seed-to-seed spread of a quantity (a table cell's mean over the images): the
    sample standard deviation of its values on at least :data:`MIN_SEEDS` models trained
    alike but for the seed (the cheapest model, standard training, in practice)."""
    v = _values("values", values)
    if v.size < MIN_SEEDS:
        raise ValueError(f"a seed-to-seed spread needs at least {MIN_SEEDS} seeds, got {v.size}")
    return float(v.std(ddof=1))


def beyond_seeds(verdict: Verdict, difference: float, spread: float, *, n_seeds: int,
                 what: str = "difference") -> Verdict:
    """The seed rule, for a comparison of training methods that rests on **one trained model
    per method**: its mean ``difference`` between two methods is set against the
    seed-to-seed ``spread`` of the same quantity, measured on ``n_seeds`` models of the
    cheapest method (:func:`seed_spread`). A win or a loss ("holds" / "does not hold")
    whose difference is no larger than that spread becomes inconclusive, since one model
    per method cannot tell the method from the seed; a larger one keeps its verdict. Other
    verdicts are unchanged. The rule says "one model per method" and the spread either way."""
    if not isinstance(verdict, Verdict):
        raise TypeError(f"verdict must be a Verdict, got {type(verdict).__name__}")
    if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or n_seeds < MIN_SEEDS:
        raise ValueError(f"n_seeds must be an integer >= {MIN_SEEDS}, got {n_seeds!r}")
    difference, spread = float(difference), float(spread)
    if not (math.isfinite(difference) and math.isfinite(spread) and spread >= 0):
        raise ValueError(f"difference and spread must be finite, spread >= 0, got "
                         f"{difference!r}, {spread!r}")
    seeds = (f"one model per method; |{what}| = {_fmt(abs(difference))} against the "
             f"seed-to-seed spread {_fmt(spread)} (standard deviation over {int(n_seeds)} seeds)")
    if verdict.verdict in ("holds", "does not hold") and abs(difference) <= spread:
        return Verdict("inconclusive", f"{verdict.rule}; {seeds}: within it, so the method "
                       "cannot be told from the seed")
    return Verdict(verdict.verdict, f"{verdict.rule}; {seeds}")
