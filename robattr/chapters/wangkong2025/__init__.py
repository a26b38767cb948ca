"""The wangkong2025 chapter: what only its notebooks use (see robattr.chapters).

``specs``      the zoo models of each notebook, declared once (for the notebooks and for
               ``robattr plan``)
``inputs``     the test inputs in a seeded random order
``reports``    our tables beside the paper's: the kept reference runs' columns, Tables 5-7's
               budgets shown whole
``tables``     the certified_eps notebook's steps for 002's Tables 5-7: a block's inputs and
               models, the certified budgets, their means, Corollary 1's ratio test
``certified``  certified_eps §1-2: the printed tables read backwards, our budgets per input,
               model, radius, threshold and M, beside the paper's
``radii``      certified_eps §3-5: Table 9's smallest radii, the certificate against d, the
               blocks' scale lines
``attack``     attack_check (Table 8): budgets per input, the attack at the certified
               budget, Table 8 and its figure
``center``     center_smoothing: Table 4 (center against ball smoothing) and Fig. 3's maps
``montecarlo`` montecarlo: the laws of ||h^||^2, their intervals, the error's CDF and its
               1/sqrt(N) scaling
``theory``     theory_ball_smoothing: Monte-Carlo checks of the crescent bound and the volume
               ratio, the minimum over shift directions, Corollary 1's tables
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("specs", "inputs", "reports", "tables", "certified",
                                          "radii", "attack", "center", "montecarlo", "theory"))
