"""Models trained alike but for the seed, and the seed-to-seed spread they measure.

A comparison of training methods that rests on one trained model per method cannot tell the
method from the seed unless it knows how much the seed alone moves the compared quantity.
The book measures that on the cheapest model (standard training, CE) at
:data:`robattr.report.verdicts.MIN_SEEDS` seeds or more, and :func:`robattr.report.verdicts.beyond_seeds`
turns a win or a loss within that spread into *inconclusive*.
"""
from __future__ import annotations

import numpy as np

__all__ = ["at_seeds", "spreads"]


def at_seeds(dataset: str, arch: str, method: str, n_seeds: int, first, **get_model_kwargs) -> list:
    """``n_seeds`` zoo models trained alike but for the seed: ``first`` (seed 0, the one the
    table uses) and :func:`robattr.zoo.get_model` at seeds 1 … n_seeds − 1 with the same
    ``get_model_kwargs``."""
    from robattr import zoo
    from robattr.report.verdicts import MIN_SEEDS

    if isinstance(n_seeds, bool) or int(n_seeds) != n_seeds or n_seeds < MIN_SEEDS:
        raise ValueError(f"n_seeds must be an integer >= {MIN_SEEDS}, got {n_seeds!r}")
    if "seed" in get_model_kwargs:
        raise ValueError("the seeds are 1 .. n_seeds - 1: do not pass seed")
    return [first] + [zoo.get_model(dataset, arch, method, seed=s, **get_model_kwargs)
                      for s in range(1, int(n_seeds))]


def spreads(values: dict) -> dict:
    """The seed-to-seed spread (:func:`robattr.report.verdicts.seed_spread`) of each cell of
    ``values``, a mapping ``cell -> one value per seed``."""
    from robattr.report.verdicts import seed_spread

    return {c: seed_spread(np.asarray(v, dtype=float)) for c, v in values.items()}
