"""Models trained alike but for the seed, and the seed-to-seed spread they measure.

A comparison of training methods that rests on one trained model per method cannot tell the
method from the seed unless it knows how much the seed alone moves the compared quantity.
The book measures that on the cheapest model (standard training, CE) at
:data:`robattr.report.verdicts.MIN_SEEDS` seeds or more, and :func:`robattr.report.verdicts.beyond_seeds`
turns a win or a loss within that spread into *inconclusive*. The seeded models themselves
are declared with the others in each chapter's ``specs`` module (a notebook's parameter rule
asks for ``MIN_SEEDS`` or more).
"""
from __future__ import annotations

import numpy as np

__all__ = ["spreads"]


def spreads(values: dict) -> dict:
    """The seed-to-seed spread (:func:`robattr.report.verdicts.seed_spread`) of each cell of
    ``values``, a mapping ``cell -> one value per seed``."""
    from robattr.report.verdicts import seed_spread

    return {c: seed_spread(np.asarray(v, dtype=float)) for c, v in values.items()}
