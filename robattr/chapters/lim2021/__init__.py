"""The lim2021 chapter: what only its notebooks use (see robattr.chapters).

``evaluate``  the chapter's shared evaluation steps: every explainer's mask, the attacks'
              random twins, per-image scores, the chapter's model, RelEx's two maskings,
              and the theory notebook's checks of 004's Theorem 1
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("evaluate",))
