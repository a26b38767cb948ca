"""joo2023 Table 1's comparisons of training methods (robattr.chapters.joo2023.compare):
several models per method resample seeds and images; one model per method falls back on the
paired gap and CE's seed spread."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from robattr.report import verdicts
from robattr.chapters.joo2023.compare import Comparisons, correct, per_image_cells
from robattr.chapters.joo2023.seeds import SEED_CELLS


def _cells(rng, shift, seeds=3, n=60):
    base = rng.normal(0, 1, n)
    return base + shift, np.stack([base + shift + rng.normal(0, 0.3) for _ in range(seeds)])


def test_seeded_cells_use_the_seed_and_image_bootstrap_and_others_the_seed_rule():
    rng = np.random.default_rng(1)
    a0, a = _cells(rng, 1.0)
    b0, b = _cells(rng, 0.0)
    comp = Comparisons({("A", "Grad", "RPS"): a0, ("B", "Grad", "RPS"): b0},
                       per_seed={("A", "Grad", "RPS"): a, ("B", "Grad", "RPS"): b},
                       spread={("Grad", "RPS"): 0.01}, ce_seeds=3)
    v = comp.better("A", "B", "Grad", "RPS", "A − B")
    assert v == verdicts.gap_seeded(a, b, what="A − B") and "seeds and images resampled" in v.rule
    # a cell without seeds: the paired gap, then the seed rule against CE's spread
    one = Comparisons({("A", "Grad", "RPS"): a0, ("B", "Grad", "RPS"): b0},
                      spread={("Grad", "RPS"): 5.0}, ce_seeds=3)
    w = one.better("A", "B", "Grad", "RPS", "A − B")
    assert w.verdict == "inconclusive" and "one model per method" in w.rule
    # no spread measured for the cell: the paired gap alone
    bare = Comparisons({("A", "x", "m"): a0, ("B", "x", "m"): b0})
    assert bare.better("A", "B", "x", "m", "A − B") == verdicts.gap(a0, b0, what="A − B")
    # the shift (a claim's allowance) moves the first side
    assert comp.better("B", "A", "Grad", "RPS", "B + 2 − A", shift=2.0).verdict == "holds"


def test_not_worse_and_highest():
    rng = np.random.default_rng(2)
    cells = {k: _cells(rng, s) for k, s in (("best", 0.5), ("near", 0.45), ("low", -1.0))}
    comp = Comparisons({(k, "Grad", "A-Ins"): v[0] for k, v in cells.items()},
                       per_seed={(k, "Grad", "A-Ins"): v[1] for k, v in cells.items()})
    assert comp.not_worse("best", "near", "Grad", "A-Ins", margin=0.5, what="w").verdict == "holds"
    assert comp.not_worse("low", "best", "Grad", "A-Ins", margin=0.1, what="w").verdict == \
        "does not hold"
    printed = []
    v = comp.highest("best", list(cells), "Grad", "A-Ins", log=printed.append)
    assert len(printed) == 2 and v.verdict in ("holds", "holds partly", "inconclusive")
    assert comp.highest("low", list(cells), "Grad", "A-Ins", log=lambda *_: None).verdict == \
        "does not hold"


def test_per_image_cells_measure_every_seed_cell_image_by_image():
    from robattr.attacks import frame_target
    from robattr.attributions import grad, input_x_grad
    from robattr.models import build

    torch.manual_seed(0)
    model = build("cnn", "digits", "softplus", 3.0).eval()
    X, Y = torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 2, 3])
    X_all, Y_all = torch.rand(10, 1, 8, 8), torch.arange(10)
    out = per_image_cells(model, X, Y, {"Grad": grad, "xGrad": input_x_grad}, X_all=X_all,
                          Y_all=Y_all, rps_eps=0.05, rps_samples=2, clamp=(0.0, 1.0), seed=0,
                          target_map=frame_target((8, 8), 2), attack_eps=0.02,
                          attack_gamma=1.0, attack_steps=2, protocol="robattr")
    assert set(out) == set(SEED_CELLS)
    assert [len(out[c]) for c in SEED_CELLS] == [4, 4, 4, 10]
    assert set(np.unique(out["", "accuracy"])) <= {0.0, 100.0}
    assert np.array_equal(out["", "accuracy"], correct(model, X_all, Y_all))
    assert np.all((out["Grad", "RPS"] >= -1) & (out["Grad", "RPS"] <= 1))


def test_gap_seeded_needs_two_seeds_in_a_comparison():
    comp = Comparisons({}, per_seed={("A", "c", "m"): np.zeros((1, 3)), ("B", "c", "m"): np.zeros((3, 3))})
    with pytest.raises(ValueError, match="2 seeds"):
        comp.better("A", "B", "c", "m", "A − B")


def _zoo_model(method, accuracy):
    m = torch.nn.Linear(1, 1)
    m.zoo_meta = {"test_acc": accuracy, "config": {"dataset": "cifar10", "arch": "lenet",
                                                   "method": method, "loss": {}, "epochs": 5}}
    return m


def test_a_model_below_its_target_sets_aside_only_its_own_comparisons():
    """"The highest of the others": the comparison with a model below its accuracy target is
    not comparable and set aside; the comparisons with the models that meet theirs decide. A
    comparison of accuracy itself is not guarded."""
    rng = np.random.default_rng(3)
    shifts = {"best": 1.0, "ok": 0.0, "weak": 2.0}          # "weak" beats "best" but misses
    cells = {(k, "Grad", "RPS"): rng.normal(0, 0.2, 80) + s for k, s in shifts.items()}
    cells.update({(k, "", "accuracy"): rng.normal(70, 1, 80) for k in shifts})
    models = {"best": _zoo_model("l2_cosd", 0.71), "ok": _zoo_model("l2", 0.70),
              "weak": _zoo_model("iga", 0.45)}
    comp = Comparisons(cells, models=models)
    assert comp.better("best", "ok", "Grad", "RPS", "w").verdict == "holds"
    aside = comp.better("best", "weak", "Grad", "RPS", "w")
    assert aside.verdict == "not comparable" and "iga lenet on cifar10: 45.0 %" in aside.rule
    v = comp.highest("best", models, "Grad", "RPS", log=lambda *_: None)
    assert v.verdict == "holds" and "1 not comparable" in v.rule
    # unguarded, the weak model's win would have made the claim fail in part
    bare = Comparisons(cells).highest("best", models, "Grad", "RPS", log=lambda *_: None)
    assert bare.verdict == "holds partly"
    assert comp.better("weak", "ok", "", "accuracy", "w").verdict != "not comparable"
    assert comp.not_worse("best", "weak", "Grad", "RPS", margin=0.1, what="w").verdict == \
        "not comparable"
