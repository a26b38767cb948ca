"""The crosspaper chapter: what only its notebooks use (see robattr.chapters).

``evaluations``  the five papers' headline evaluations, one call each (model, batch -> scalars)
``matrix``       the cross-paper matrix: every evaluation of one model, per-image headlines,
                 directions, costs, each paper's defenses against standard training, the
                 Pareto front
``rows``         the matrix's rows: training methods, their zoo models, their training cost
                 beside the papers' tables, the test images
``tables``       the matrix assembled, shown, ranked and checked; robustness per unit of cost
``agreement``    Spearman's and Kendall's agreement between the headlines, each paper's
                 defenses against standard training per image
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("evaluations", "matrix", "rows", "tables", "agreement"))
