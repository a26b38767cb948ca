"""The wangkong2023 chapter: what only its notebooks use (see robattr.chapters).

``specs``        the zoo models of each notebook, declared once (for the notebooks and for
                 ``robattr plan``)
``tables``       the bookkeeping of 001's Tables 6-10 around :func:`robattr.bounds.evaluate_bounds`:
                 random reference, crossings, wide tables, the linear-share verdict
``ig_jacobian``  the ig_gradient notebook's studies: C.1's Jacobian of IG (steps, beta, synthetic
                 checks), B.1's linearity residual and max-pool jumps, the bound at ImageNet size
``exact_checks`` theory_bounds' synthetic checks: Thm 1, Lemma 1 / Cor 1, Thm 2, Cor 2 and the
                 hand-built map against Eq. 39, on random linear maps and vectors
``model_checks`` theory_bounds' first-order checks on the trained model, one attribution map at a
                 time: xi_max, Thm 1-3, Prop 1, Sec. E
``table_runs``   tables_bounds' runs (attack settings, models, images) and their tables, crossings
                 and pooled verdicts around ``tables``
``figures``      the chapter's figures that robattr.report.viz has no function for
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("specs", "tables", "table_runs", "ig_jacobian",
                                           "exact_checks", "model_checks", "figures"))
