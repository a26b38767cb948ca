"""The joo2023 chapter: what only its notebooks use (see robattr.chapters).

``specs``   the zoo models each notebook trains, declared once (for ``robattr plan`` too):
            003's regularisers, the units of their λ, the shared training options
``models``  the trained models' printed names, Table 1's blocks, a model at several seeds
``compare`` Table 1's comparisons of training methods, with one model per method or several
``seeds``   the seed-to-seed spread of standard training behind Table 1's comparisons of
            training methods (CE at several seeds, the table's cells on each)
``table1``  Table 1's cells and tables (ours beside the paper's), the appendix's RPS and
            Table 4, the broken-maps check
``figures`` Table 1's figures: Fig. 2's insertion curves and images, Fig. 3a's maps
``cost``    Table 2's training cost and the λ × λ_c grid behind Table 1's model
``theory``  the theory notebook's checks over random and trained networks (Lemma 3, Prop. 5,
            App. B, Thm 6, Fig. 3b)
``toy``     Fig. 1's 2-D toy: its networks, the MaxEnt loss, nearby pairs and their statistics
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("specs", "compare", "models", "seeds", "table1",
                                          "figures", "cost", "theory", "toy"))
