"""Table 1's comparisons of training methods, with one model per method or several.

Table 1's claims are about training methods, and one trained model per method is one draw of
each (003 does not say how many runs a number stands for). Where the profile trains
``reg_seeds`` models per regulariser (seeds 0, 1, …), a comparison
then resamples the seeds of each method and the images (:func:`robattr.report.verdicts.gap_seeded`).
With one model per method it compares the two models image by image
(:func:`robattr.report.verdicts.gap`) and sets the difference against the seed-to-seed spread of
standard training (:func:`robattr.report.verdicts.beyond_seeds`), measured on CE at
``ce_seeds`` seeds. :class:`Comparisons` picks the rule a cell can have.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["Comparisons", "per_image_cells", "correct"]


@torch.no_grad()
def correct(model, X, Y, batch: int = 1000) -> np.ndarray:
    """Per-image correctness of ``model`` on ``(X, Y)``, in points (0 or 100)."""
    pred = torch.cat([model(xb).argmax(1) for xb in X.split(batch)])
    return 100 * (pred == Y).double().cpu().numpy()


def per_image_cells(model, X, Y, methods: dict, *, X_all=None, Y_all=None, rps_eps: float,
                    rps_samples: int, clamp, seed: int, target_map, attack_eps: float,
                    attack_gamma: float, attack_steps: int,
                    protocol: str) -> dict[tuple[str, str], np.ndarray]:
    """Each of :data:`~robattr.chapters.joo2023.seeds.SEED_CELLS` of one model, image by
    image, by the same calls and settings as Table 1's own cells: RPS as a fraction and Adv-Insertion in points on
    ``(X, Y)``, accuracy in points on the whole test split ``(X_all, Y_all)`` (left out
    without it)."""
    from robattr.attacks import targeted_attack
    from robattr.metrics import adv_insertion, rps

    out = {}
    for attr in ("Grad", "xGrad"):
        r = rps(model, methods[attr], X, Y, eps=rps_eps, n_samples=rps_samples, clamp=clamp,
                generator=torch.Generator(device=X.device).manual_seed(seed))
        out[attr, "RPS"] = r.double().cpu().numpy()
    res = targeted_attack(model, X, Y, target_map=target_map, eps=attack_eps,
                          method=methods["Grad"], gamma=attack_gamma, steps=attack_steps)
    ains = adv_insertion(model, methods["Grad"], X, res.x_adv, Y, protocol=protocol)
    out["Grad", "A-Ins"] = 100 * ains.mean.double().cpu().numpy()
    if X_all is not None:
        out["", "accuracy"] = correct(model, X_all, Y_all)
    return out


@dataclass
class Comparisons:
    """The comparisons of Table 1's models. ``per_img``: ``(model, attribution, metric) ->
    per-image values`` of the table's models (seed 0); ``per_seed``: the same cells as
    ``seeds x images`` arrays where several seeds were trained (``SEED_CELLS``);
    ``spread``: CE's seed-to-seed spread per ``(attribution, metric)`` over ``ce_seeds``
    seeds, for the comparisons that rest on one model per method. ``models``: the trained
    model of each name (seed 0); a comparison of two of them is guarded by their accuracy
    targets (:func:`robattr.report.verdicts.models_fit`) on its own, so that in a claim made
    of several comparisons ("the highest of the six") only the comparisons with a model
    below its target are set aside, and the others still decide. A comparison of accuracy
    itself is never guarded by it."""

    per_img: dict
    per_seed: dict = field(default_factory=dict)
    spread: dict = field(default_factory=dict)
    ce_seeds: int = 0
    models: dict = field(default_factory=dict)

    def _guarded(self, v, a: str, b: str, metric: str):
        from robattr.report import verdicts

        pair = [self.models[k] for k in (a, b) if k in self.models]
        return verdicts.models_fit(v, pair) if pair and metric != "accuracy" else v

    def seeded(self, a: str, b: str, attr: str, metric: str) -> bool:
        """Whether both models of a comparison have several seeds for this cell."""
        return (a, attr, metric) in self.per_seed and (b, attr, metric) in self.per_seed

    def better(self, a: str, b: str, attr: str, metric: str, what: str, *,
               shift: float = 0.0):
        """"``a`` (plus ``shift``) is better than ``b``" on one cell (guarded when both
        are among :attr:`models`)."""
        from robattr.report import verdicts

        if self.seeded(a, b, attr, metric):
            return self._guarded(verdicts.gap_seeded(self.per_seed[a, attr, metric] + shift,
                                                     self.per_seed[b, attr, metric], what=what),
                                 a, b, metric)
        x, y = self.per_img[a, attr, metric] + shift, self.per_img[b, attr, metric]
        v = verdicts.gap(x, y, what=what)
        if (attr, metric) in self.spread:
            v = verdicts.beyond_seeds(v, float(np.mean(x) - np.mean(y)),
                                      self.spread[attr, metric], n_seeds=self.ce_seeds, what=what)
        return self._guarded(v, a, b, metric)

    def not_worse(self, a: str, b: str, attr: str, metric: str, margin: float, what: str):
        """"``a`` is as good as ``b`` or better, within ``margin``" on one cell (guarded
        as :meth:`better`)."""
        from robattr.report import verdicts

        if self.seeded(a, b, attr, metric):
            v = verdicts.gap_seeded(self.per_seed[a, attr, metric],
                                    self.per_seed[b, attr, metric], margin=margin, what=what)
        else:
            v = verdicts.not_worse(self.per_img[a, attr, metric], self.per_img[b, attr, metric],
                                   margin=margin, what=what)
        return self._guarded(v, a, b, metric)

    def highest(self, best: str, others, attr: str, metric: str, log=print):
        """"``best`` has the highest cell": one comparison with each of ``others``,
        combined (:func:`robattr.report.verdicts.combine`); each printed as it is decided."""
        from robattr.report import verdicts

        cells = []
        for other in others:
            if other == best:
                continue
            v = self.better(best, other, attr, metric, f"{best} − {other} {attr} {metric}")
            log(f"{attr} {metric}, {best} vs {other}: {v.verdict} ({v.rule})")
            cells.append(v)
        return verdicts.combine(cells, what="comparisons with the other models")
