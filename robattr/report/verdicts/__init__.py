"""Verdicts on the papers' claims, computed from a run's numbers by stated rules.

A notebook never writes a verdict. It hands its numbers to a rule, and the rule returns a
:class:`Verdict`: one of :data:`VERDICTS` with a sentence that states the rule and the
numbers that decided it, uncertainty included. :func:`robattr.report.papers.claim` renders it
with the run's scale (dataset and input size, model, how many images or cases, profile)
and records it, so the book's Verdicts page lists every claim of a build.

The rules (each can return every outcome it names; ``tests/report/test_verdicts.py`` reaches each):

* :func:`gap`: paired values (one per image, seed or cell), "a is better than b": the
  bootstrap interval of the mean difference decides holds / does not hold /
  inconclusive (the interval holds 0);
* :func:`combine`: several verdicts (cells of a table) into one, by a symmetric rule
  (:data:`COMBINE_RULE`): swapping "holds" and "does not hold" in the parts mirrors it;
* :func:`exact`: an exact statement checked on ``n`` cases: holds with 0 violations,
  does not hold otherwise;
* :func:`share`: "at least a share ``p`` of the cases": the Wilson interval of the
  observed share against ``p`` (and it says when ``n`` is too small for "holds" to be
  reachable at all: :func:`share_cases_needed`);
* :func:`share_clustered`: the same share when cases come in correlated groups (one
  image under several models or budgets): a cluster bootstrap over whole images;
* :func:`rank_agreement`: "two evaluations rank the units alike": Spearman's ρ with a
  bootstrap interval that resamples whole pairs and recomputes ρ
  (:func:`spearman_interval`, always within [−1, 1]), above 0 / below 0 / holding 0;
* :func:`attack_effective`: the guard of a robustness claim: when the attacked maps move
  no more than under random noise of the same size, the attack is ineffective at this
  scale: there is nothing to resist, so the claim (or the cell) is not tested there and is
  not comparable, whatever the method (:func:`combine` sets such a cell aside);
* :func:`within_hypothesis`: the guard of a statement made under a hypothesis: when the
  run's models break it, the statement is not tested by the run, and its verdict is not
  comparable, whatever the numbers (which the rule still states);
* :func:`beyond_seeds`: the seed rule of a comparison of training methods on one model per
  method: a difference no larger than the seed-to-seed spread (:func:`seed_spread`, CE at
  :data:`MIN_SEEDS` seeds or more) is not a win or a loss;
* :func:`gap_seeded`: "method A is better than B" (or, with a margin, "as good or
  better") from several trained models per method: a two-level bootstrap that resamples
  the seeds of each method and the images, so the seed-to-seed noise is in the interval;
* :func:`models_fit`: the guard of a claim that compares *training methods* through trained
  models, and only of such a claim: when a model falls short of its accuracy target (per
  dataset, architecture and method, with its source: :mod:`robattr.targets`), the
  difference may be the training budget rather than the method, and the verdict is not
  comparable (the rule still states what was measured). Bounds, certificates and
  comparisons of attributions on one model are judged on the model at hand.

:func:`print_cells` prints the cells a combined verdict rests on (a notebook's evidence).
"""
from __future__ import annotations

from robattr.report.verdicts.guards import (MIN_SEEDS, beyond_seeds, models_fit, seed_spread,
                                            within_hypothesis)
from robattr.report.verdicts.rules import (COMBINE_RULE, VERDICTS, Verdict, attack_effective,
                                           bootstrap_interval, combine, exact, gap, negate,
                                           not_worse, rank_agreement, share, share_cases_needed,
                                           share_clustered, spearman_interval, underpowered)
from robattr.report.verdicts.seeded import gap_seeded
from robattr.report.verdicts.scale import (PROFILE_ENV, Scale, current_scale, print_cells,
                                           set_scale, training_summary)

__all__ = ["VERDICTS", "Verdict", "gap", "not_worse", "combine", "COMBINE_RULE", "negate",
           "exact", "share", "share_cases_needed", "underpowered", "share_clustered",
           "rank_agreement", "spearman_interval", "attack_effective", "within_hypothesis",
           "models_fit", "seed_spread", "beyond_seeds", "MIN_SEEDS", "gap_seeded", "Scale", "set_scale",
           "training_summary", "current_scale", "PROFILE_ENV", "print_cells", "bootstrap_interval"]
