"""The crosspaper chapter: what only its notebooks use (see robattr.chapters).

``evaluations``  the five papers' headline evaluations, one call each (model, batch -> scalars)
``matrix``       the cross-paper matrix: every evaluation of one model, per-image headlines,
                 directions, costs, each paper's defenses against standard training, the
                 Pareto front
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("evaluations", "matrix"))
