"""The joo2023 chapter: what only its notebooks use (see robattr.chapters).

``models``  the models its notebooks train (003's regularisers, the units of their λ)
``compare`` Table 1's comparisons of training methods, with one model per method or several
``seeds``   the seed-to-seed spread of standard training behind Table 1's comparisons of
            training methods (CE at several seeds, the table's cells on each)
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("compare", "models", "seeds"))
