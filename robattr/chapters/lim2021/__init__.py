"""The lim2021 chapter: what only its notebooks use (see robattr.chapters).

``specs``     the zoo models each notebook trains, declared once (for ``robattr plan`` too)
``evaluate``  the chapter's shared evaluation steps: every explainer's mask, the attacks'
              random twins, per-image scores, the chapter's model, RelEx's two maskings,
              and the theory notebook's checks of 004's Theorem 1
``classes``   the clean-classes notebook: Table S3's scores, Fig. 6's every-class scores
``transfer``  the targeted-transfer notebook: the attacks, their scores, Table S2
``sweep``     the untargeted notebook: the attack sweep, its guards, curves and tables
``theory``    the theory notebook: Theorem 1 rows and tables, Eq. 7, the lambda1 sweep,
              Theorem 2's pairs
``figures``   the chapter's figures
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("specs", "evaluate", "classes", "transfer", "sweep",
                                          "theory", "figures"))
