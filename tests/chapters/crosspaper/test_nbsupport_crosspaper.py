"""The package functions that crosspaper/matrix calls instead of computing in its cells
(issue 19): one model under every evaluation (evaluate_all), a headline's per-image values
(headline_per_image), each paper's defenses against CE (defenses_against_reference) and the
Pareto front (pareto_front). The agreement of two evaluations (Spearman's rho with its
bootstrap) is robattr.report.verdicts.rank_agreement, tested in tests/report/test_verdicts.py.
Where the notebook used to compute the same thing itself, its old code is the reference."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from robattr import attack_protocol as P
from robattr.attacks import topk_attack
from robattr.attributions import grad
from robattr.bounds import ball_smoothing_max_eps, ball_smoothing_stats
from robattr.chapters import crosspaper as E
from robattr.metrics import auc_over_eps, rps

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: small sizes of every evaluation (as tests/chapters/crosspaper/test_crosspaper_evaluate.py)
KW = {
    "wang2020": dict(eps_list=(2 / 255, 8 / 255), k=4, steps=2, ig_steps=2, n_samples=2, seed=0),
    "wangkong2023": dict(k=4, l2_steps=2, linf_steps=2, direct_steps=2, ig_steps=2, seed=0),
    "wangkong2025": dict(n_samples=4, n_attack=2, n_check=4, steps=2, k=4, attack_eps=0.5, seed=0),
    "joo2023": dict(rps_samples=2, attack_steps=2, ratios=4, seed=0),
    "lim2021": dict(pgd_steps=2, relex_epochs=2, n_noisy=2, ratios=4, seed=0),
}


# --------------------------------------------------------------------------- evaluate_all
def test_evaluate_all_is_every_evaluation_in_order(cnn, batch):
    model, (x, y) = cnn(), batch(2)
    cells, seconds = E.evaluate_all(model, x, y, KW)
    expected = {}
    for paper, fn in E.EVALUATIONS.items():
        expected.update({(paper, k): v for k, v in fn(model, x, y, **KW[paper]).items()})
    assert list(cells) == list(expected)
    assert cells == expected                   # every evaluation is deterministic under its seed
    assert list(seconds) == list(E.EVALUATIONS)
    assert all(isinstance(s, float) and s >= 0 for s in seconds.values())


def test_evaluate_all_refuses_unknown_papers_and_arguments(cnn, batch):
    model, (x, y) = cnn(), batch(2)
    with pytest.raises(ValueError, match="not papers"):
        E.evaluate_all(model, x, y, {"wang2021": {}})
    with pytest.raises(ValueError, match="k must be"):
        E.evaluate_all(model, x, y, {**KW, "wang2020": {**KW["wang2020"], "k": 0}})


# --------------------------------------------------------------------------- headline_per_image
def _old_notebook_per_image(paper, m, X, Y, kw):
    """crosspaper/matrix's headline_per_image before it moved into the package."""
    seed = kw["seed"]
    if paper == "joo2023":
        v = rps(m, grad, X, Y, eps=kw.get("rps_eps", 16 / 255), n_samples=kw["rps_samples"],
                generator=torch.Generator(device=X.device).manual_seed(seed))
    elif paper == "wangkong2025":
        def unit_grad(model, x, target=None, *, create_graph=False, **options):
            g = grad(model, x, target, create_graph=create_graph, **options)
            return g / g.flatten(1).norm(dim=1).clamp_min(1e-30).reshape((-1,) + (1,) * (g.ndim - 1))
        r, T = kw.get("r", 1.0), kw.get("T", 0.8)
        st = ball_smoothing_stats(m, X, Y, r=r, n_samples=kw["n_samples"], base=unit_grad, seed=seed)
        h = st["h"].flatten(1).norm(dim=1).double().cpu().numpy()
        v = ball_smoothing_max_eps(np.clip(h, 1e-12, 1.0), 1.0, X[0].numel(), r, T, corrected=True)
    else:
        name, opts = P.METHODS_WANG2020["SM"]
        clean = P.attribution_map_wang2020(name, opts, m, X, Y, seed)
        kin = []
        for eps in kw["eps_list"]:
            res = topk_attack(m, X, Y, k=kw["k"], eps=eps, criterion="mass", method=name,
                              method_options=dict(opts), steps=kw["steps"], seed=seed)
            kin.append(P.metrics_wang2020(clean, P.attribution_map_wang2020(name, opts, m, res.x_adv, Y, seed),
                                     kw["k"])["k-in"])
        v = auc_over_eps(torch.stack(kin, -1).double())
    return np.asarray(v.detach().cpu() if torch.is_tensor(v) else v, dtype=float).reshape(-1)


@pytest.mark.parametrize("paper", list(E.PER_IMAGE_HEADLINES))
def test_headline_per_image_means_are_the_cells_and_match_the_old_helper(cnn, batch, paper):
    model, (x, y) = cnn(1), batch(3, seed=1)
    v = E.headline_per_image(paper, model, x, y, **KW[paper])
    assert v.shape == (3,) and v.dtype == np.float64
    cell = E.EVALUATIONS[paper](model, x, y, **KW[paper])[E.PER_IMAGE_HEADLINES[paper]]
    assert np.isclose(v.mean(), cell, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(v, _old_notebook_per_image(paper, model, x, y, KW[paper]),
                               rtol=1e-6, atol=1e-9)


def test_headline_per_image_uses_the_predictions_without_labels(cnn, batch):
    model, (x, _) = cnn(), batch(2)
    pred = model(x).argmax(1)
    np.testing.assert_array_equal(E.headline_per_image("joo2023", model, x, None, **KW["joo2023"]),
                                  E.headline_per_image("joo2023", model, x, pred, **KW["joo2023"]))


@pytest.mark.parametrize("paper, kw, match", [
    ("lim2021", {}, "paper must be one of"),
    ("joo2023", {"eps": 0.1}, "takes no argument"),
    ("joo2023", {"rps_samples": 0}, "rps_samples"),
    ("wangkong2025", {"T": 1.5}, "T must be"),
    ("wangkong2025", {"base": "lrp"}, "base must be"),
    ("wang2020", {"eps_list": (0.1,)}, "eps_list"),
    ("wang2020", {"k": 65}, "k must be at most"),
])
def test_headline_per_image_refuses_bad_arguments(cnn, batch, paper, kw, match):
    model, (x, y) = cnn(), batch(2)
    with pytest.raises(ValueError, match=match):
        E.headline_per_image(paper, model, x, y, **kw)
    with pytest.raises(ValueError, match="x must be"):
        E.headline_per_image("joo2023", model, x * 2, y)


# --------------------------------------------------------------------------- defenses_against_reference
HEAD = [("wang2020", "kin_auc_SM"), ("wangkong2023", "T_c_deg_l2"),
        ("wangkong2025", "eps_cert_mean"), ("joo2023", "rps_Grad")]
OWN = {"wang2020": (["SSR", "AT-l2"], ("wang2020", "kin_auc_SM")),
       "joo2023": (["l2", "missing"], ("joo2023", "rps_Grad")),
       "wangkong2025": (["IGR"], ("wangkong2025", "eps_cert_mean"))}


def _matrix(values, rows=("CE", "SSR", "AT-l2", "l2")):
    return pd.DataFrame(np.asarray(values, dtype=float), index=list(rows),
                        columns=pd.MultiIndex.from_tuples(HEAD, names=["paper", "metric"]))


def _old_notebook_own(matrix, own, head):
    """crosspaper/matrix's own-defense table before it moved into the package."""
    rows = []
    for paper, (defs, col) in own.items():
        defs = [d for d in defs if d in matrix.index]
        if "CE" not in matrix.index or not defs:
            continue
        s = 1.0 if E.higher_is_better(col[1]) else -1.0
        ce_v = float(matrix.loc["CE", col])
        for d in defs:
            own_v = float(matrix.loc[d, col])
            others = {c: float(np.sign((matrix.loc[d, c] - matrix.loc["CE", c]) *
                                       (1 if E.higher_is_better(c[1]) else -1)))
                      for c in head if c[0] not in ("cost", paper)}
            rows.append(dict(paper=paper, defense=d, headline=col[1], CE=ce_v, defense_value=own_v,
                             beats_CE=bool(s * (own_v - ce_v) > 0),
                             beats_CE_on_other_headlines=f"{int(sum(v > 0 for v in others.values()))} of {len(others)}"))
    return pd.DataFrame(rows)


def test_defenses_against_reference_known_case():
    m = _matrix([[1.0, 30.0, 0.1, 0.90],     # CE
                 [2.0, 20.0, 0.1, 0.80],     # SSR: better k-in, smaller angle (better), tie, worse RPS
                 [0.5, 40.0, 0.2, 0.95],     # AT-l2
                 [1.0, 10.0, 0.0, 0.95]])    # l2
    out = E.defenses_against_reference(m, OWN, HEAD)
    assert list(out.columns) == ["paper", "defense", "headline", "CE", "defense_value", "beats_CE",
                                 "beats_CE_on_other_headlines"]
    assert list(zip(out.paper, out.defense)) == [("wang2020", "SSR"), ("wang2020", "AT-l2"),
                                                 ("joo2023", "l2")]          # IGR is not a row
    ssr = out.iloc[0]
    assert (ssr.CE, ssr.defense_value, ssr.beats_CE) == (1.0, 2.0, True)
    assert ssr.beats_CE_on_other_headlines == "1 of 3"   # the angle only (a tie is no win)
    assert not out.iloc[1].beats_CE
    assert out.iloc[1].beats_CE_on_other_headlines == "2 of 3"   # eps_cert and RPS
    l2 = out.iloc[2]
    assert l2.beats_CE and l2.beats_CE_on_other_headlines == "1 of 3"   # the angle
    assert E.defenses_against_reference(m.drop(index="CE"), OWN, HEAD).empty


def test_defenses_against_reference_matches_the_old_helper():
    rng = np.random.default_rng(0)
    for _ in range(20):
        m = _matrix(rng.integers(0, 3, size=(4, 4)))      # many ties
        pd.testing.assert_frame_equal(E.defenses_against_reference(m, OWN, HEAD),
                                      _old_notebook_own(m, OWN, HEAD))


def test_defenses_against_reference_names_its_columns_after_the_reference():
    m = _matrix(np.ones((4, 4)))
    out = E.defenses_against_reference(m, {"joo2023": (["CE"], ("joo2023", "rps_Grad"))}, HEAD,
                                       reference="l2")
    assert {"l2", "beats_l2", "beats_l2_on_other_headlines"} <= set(out.columns)


def test_defenses_against_reference_refuses_bad_input():
    m = _matrix(np.ones((4, 4)))
    with pytest.raises(ValueError, match="DataFrame"):
        E.defenses_against_reference(m.droplevel(0, axis=1), OWN, HEAD)
    with pytest.raises(ValueError, match="not in the matrix"):
        E.defenses_against_reference(m, OWN, HEAD + [("lim2021", "retrieval_SimGrad")])
    with pytest.raises(ValueError, match="defenses must map"):
        E.defenses_against_reference(m, [("wang2020", "SSR")], HEAD)


# --------------------------------------------------------------------------- pareto_front
def test_pareto_front_known_case():
    score = pd.Series({"CE": 3.0, "A": 1.0, "B": 2.0, "C": 2.0, "D": 1.0})
    cost = pd.Series({"CE": 1.0, "A": 5.0, "B": 2.0, "C": 3.0, "D": 5.0})
    # C is beaten by B (same score, cheaper); A and D tie on both, so neither beats the other
    assert E.pareto_front(score, cost.loc[list("DCBA") + ["CE"]]) == ["CE", "A", "B", "D"]


def test_pareto_front_is_the_set_nobody_dominates():
    rng = np.random.default_rng(2)
    for _ in range(30):
        idx = [f"r{i}" for i in range(6)]
        s, c = (pd.Series(rng.integers(0, 4, 6).astype(float), index=idx) for _ in range(2))
        front = E.pareto_front(s, c)
        for r in idx:
            dominated = any(s[o] <= s[r] and c[o] <= c[r] and (s[o], c[o]) != (s[r], c[r])
                            for o in idx)
            assert (r in front) == (not dominated)


def test_pareto_front_refuses_bad_input():
    s = pd.Series({"a": 1.0, "b": 2.0})
    with pytest.raises(ValueError, match="Series"):
        E.pareto_front(s.to_numpy(), s)
    with pytest.raises(ValueError, match="share"):
        E.pareto_front(s, pd.Series({"a": 1.0, "c": 2.0}))
    with pytest.raises(ValueError, match="NaN"):
        E.pareto_front(s, pd.Series({"a": 1.0, "b": np.nan}))


def test_the_names_are_public():
    for name in ("evaluate_all", "headline_per_image", "defenses_against_reference",
                 "pareto_front", "PER_IMAGE_HEADLINES"):
        assert name in E.__all__
    assert "spearman_terms" not in E.__all__   # its bootstrap left [-1, 1] (issue 41)
    assert set(E.PER_IMAGE_HEADLINES) <= set(E.EVALUATIONS)
