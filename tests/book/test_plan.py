"""robattr plan: the notebooks' declarations, the cost model, dataset presence, the table.

The declarations are checked against reality: a notebook executed (smoke profile) with an
empty zoo must train exactly the models its declaration lists. Two cheap notebooks run in
every test session; the others are marked slow.
"""
from __future__ import annotations

import ast
import importlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robattr import chapters, cost, data, zoo
from robattr.book import calibration, cli, notebooks, plan, plan_check, profiles
from robattr.book.params import ParameterError
from robattr.catalog import LOSS_NAMES

ROOT = Path(__file__).resolve().parents[2]
KEYS = [nb.key for nb in notebooks.discover(ROOT)]


# ------------------------------------------------------------------ declarations
def test_every_notebook_has_a_declaration_and_nothing_else():
    assert set(chapters.declarations()) == set(KEYS)
    assert plan.DECLARATIONS == chapters.declarations()          # the former name
    for key in KEYS:                                   # each in its chapter's plan module
        chapter, _, name = key.partition("/")
        module = importlib.import_module(f"robattr.chapters.{chapter}.plan")
        assert module.DECLARATIONS[name] is chapters.declaration(key)


@pytest.mark.parametrize("profile", profiles.PROFILES)
def test_declarations_evaluate_in_every_profile(profile):
    prof = profiles.load_profile(profile)
    for nb in notebooks.discover(ROOT):
        params = profiles.resolve(nb, prof)
        cfgs = plan.declared_models(nb.key, params)
        assert len({plan._zoo_key(c) for c in cfgs}) == len(cfgs), nb.key    # each once
        for w in plan.declared_work(nb.key, params):
            assert w.kind in calibration._PASSES + ("step", "numpy", "eigh", "matmul"), (nb.key, w)
            assert math.isfinite(w.calls) and w.calls >= 0 and w.rows >= 0, (nb.key, w)
        for name in plan.declared_data(nb.key, params):
            assert isinstance(name, str)


@pytest.mark.parametrize("rounds", [1, 7])
def test_table3s_cost_cell_steps_each_method_at_ssrs_batch(rounds):
    nb = notebooks.find("wang2020/table3_4_ssr", notebooks.discover(ROOT))
    params = {**profiles.resolve(nb, "quick"), "timing_rounds": rounds, "batch_size_ig_norm": 4}
    steps = [w for w in plan.declared_work(nb.key, params) if w.what.startswith("Table 3 cost")]
    assert [w.calls for w in steps] == [rounds + 1] * 3          # a warm-up and the rounds
    methods = [json.loads(w.family)["method"] for w in steps]
    assert methods == ["ssr", "at", "ig_norm"]
    assert {json.loads(w.family)["batch_size"] for w in steps} == {64}   # not IG-NORM's own 4


def test_models_are_declared_once_in_each_chapters_specs_module():
    """Issue 40: the models a notebook trains are listed once, in its chapter's ``specs``
    module, which both the notebook and ``robattr plan`` call; a plan module writes no model
    spec of its own (``robattr.cost.spec``), and neither module needs torch to be read."""
    import subprocess
    import sys

    for chapter in sorted({k.partition("/")[0] for k in KEYS}):
        plan_src = (ROOT / "robattr" / "chapters" / chapter / "plan.py").read_text()
        tree = ast.parse(plan_src)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
                 getattr(n.func, "id", getattr(n.func, "attr", None)) == "spec"]
        assert not calls, f"robattr/chapters/{chapter}/plan.py writes model specs itself " \
            f"(lines {[n.lineno for n in calls]}); they belong in its specs module"
        assert (ROOT / "robattr" / "chapters" / chapter / "specs.py").is_file(), chapter
    code = ("import sys, robattr.chapters as c\n"
            "for k in sorted({d.partition('/')[0] for d in c.declarations()}):\n"
            "    __import__(f'robattr.chapters.{k}.plan'); __import__(f'robattr.chapters.{k}.specs')\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == "False", "reading the plan and specs modules imports torch"


def test_three_notebooks_train_nothing():
    prof = profiles.load_profile("quick")
    empty = sorted(nb.key for nb in notebooks.discover(ROOT)
                   if not plan.declared_models(nb.key, profiles.resolve(nb, prof)))
    assert empty == ["joo2023/toy_fig1", "wangkong2025/montecarlo",
                     "wangkong2025/theory_ball_smoothing"]


def test_an_undeclared_notebook_is_a_clear_error():
    with pytest.raises(ParameterError, match="no plan declaration"):
        plan.declared_models("nowhere/nothing", {})


@settings(max_examples=25, deadline=None)
@given(method=st.sampled_from(LOSS_NAMES), epochs=st.integers(1, 500),
       lr=st.floats(1e-5, 1.0), seed=st.integers(0, 10**6),
       activation=st.sampled_from(["relu", "softplus"]))
def test_the_plans_zoo_key_is_the_zoos(method, epochs, lr, seed, activation):
    beta = 3.0 if activation == "softplus" else None
    kw = dict(epochs=epochs, lr=lr, seed=seed, activation=activation, beta=beta)
    cfg = zoo.config("digits", "cnn", method, **kw)
    assert plan._zoo_key(cfg) == zoo.config_hash("digits", "cnn", method, **kw)


def test_the_train_sizes_are_the_loaders():
    assert len(data.load("digits", "train")) == cost.TRAIN_SIZES["digits"]


# ------------------------------------------------------------------ the cost model
FAM = cost.family("digits", "cnn")


def test_families_name_shape_classes_and_precision():
    assert FAM == "cnn:1x8x8:10"
    assert cost.family("cifar10", "resnet20", float64=True) == "resnet20:3x32x32:10:float64"
    big = cost.family(shape=(3, 224, 224), arch="resnet18", classes=1000)
    assert big == "resnet18:3x224x224:1000"


@given(images=st.integers(1, 500), per=st.integers(1, 300), repeat=st.integers(1, 50))
def test_passes_count_rows_and_chunked_calls(images, per, repeat):
    w = cost.grads(FAM, images, per, repeat)
    assert w.rows == images * per * repeat
    assert w.calls == repeat * math.ceil(images * per / cost.CHUNK)


def test_attribution_costs_follow_their_sample_counts():
    assert cost.attr(FAM, 4, "integrated_gradients", steps=50)[0].rows == 200
    assert cost.attr(FAM, 4, "smoothgrad", n_samples=10)[0].rows == 40
    relex = cost.attr(FAM, 4, "relex", epochs=20, n_noisy=8)[0]
    assert relex.rows == 20 * 4 * 2 * 8 and relex.calls == 20           # two rows per copy
    assert cost.attr(FAM, 4, "relex", epochs=20, batch=False)[0].rows == 20 * 4 * 2
    with pytest.raises(ValueError, match="no cost declared"):
        cost.attr(FAM, 4, "nonsense")


def fake_calibration(**kw):
    cal = calibration.Calibration("cpu", "test device", notebook=2.0, figure=0.5, numpy=1e-8,
                                  eigh=1e-9, matmul=1e-10)
    for kind in calibration._PASSES:
        cal.passes[f"{kind}|{FAM}"] = (1e-3, 1e-5)
    cal.__dict__.update(kw)
    return cal


def test_the_cost_of_a_pass_is_linear_in_calls_and_rows():
    cal = fake_calibration()
    assert cal.cost(cost.Work("grad", FAM, 10, 1000)) == pytest.approx(10 * 1e-3 + 1000 * 1e-5)
    assert cal.cost(cost.numpy_draws(1e6)) == pytest.approx(1e-2)
    assert cal.cost(cost.eigh(100, 3)) == pytest.approx(3 * 1e6 * 1e-9)
    assert cal.cost(cost.matmul(4, 10, 20, 30)) == pytest.approx(4 * 6000 * 1e-10)
    with pytest.raises(KeyError):
        cal.cost(cost.Work("grad", "mlp:1x1x2:2", 1, 1))        # not calibrated


@given(d=st.sampled_from([64, 784, 3072]), n=st.integers(1, 64))
def test_the_linf_bound_declares_its_cubic_product(d, n):
    """Thm 2's l-inf bound sums |J^T J| (robattr.bounds.linf_deviation_bound): n products
    of d x d matrices, d**3 multiply-adds each, besides the d vjps of the dense Jacobian.
    At d = 784 (MNIST) with 64 images that product took 1.5 s of a 2.2 s call, undeclared."""
    shape = {64: "digits", 784: "mnist", 3072: "cifar10"}[d]
    linf = cost.bounds_wangkong2023(FAM, shape, n, 1, "linf", 10, 10)
    l2 = cost.bounds_wangkong2023(FAM, shape, n, 1, "l2", 10, 10)
    mm = [w for w in linf if w.kind == "matmul"]
    assert len(mm) == 1 and mm[0].calls == n and mm[0].rows == n * d ** 3
    assert not [w for w in l2 if w.kind == "matmul"]
    dense = [w for w in linf if w.what.endswith("dense Jacobian")]
    assert len(dense) == 1 and dense[0].rows == n * d        # d vjps of n rows


def test_an_attack_with_a_surrogate_also_scores_its_iterates():
    plain = cost.attack(FAM, 8, 10, 4)
    both = cost.attack(FAM, 8, 10, 4, surrogate=True)
    assert [w.kind for w in plain] == ["astep"] and plain[0].rows == 10 * 8 * 4
    assert [w.kind for w in both] == ["astep", "grad"]


# ------------------------------------------------------------------ calibration cache
@pytest.fixture
def quiet_machine(monkeypatch):
    """The machine running the tests may be busy (the suite itself): calibrate as if not."""
    monkeypatch.setattr(calibration, "_busy", lambda device: "")


def test_calibration_is_measured_once_per_device(tmp_path, monkeypatch, quiet_machine):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    measured = []
    monkeypatch.setattr(calibration, "_measure_pass",
                        lambda k, f, d: measured.append((k, f)) or (1e-3, 1e-5))
    monkeypatch.setattr(calibration, "_measure_numpy", lambda: 1e-8)
    works = [cost.grads(FAM, 4), cost.fwd(FAM, 4), cost.numpy_draws(10)]
    cal = calibration.calibrate(works, "cpu", notebook=False)
    assert sorted(measured) == [("fwd", FAM), ("grad", FAM)] and cal.numpy == 1e-8
    again = calibration.calibrate(works, "cpu", notebook=False)
    assert len(measured) == 2 and again.passes == cal.passes          # read from the cache
    files = list((tmp_path / "plan").glob("calibration-cpu-*.json"))
    assert len(files) == 1 and "torch" in files[0].name


def test_a_training_step_is_priced_from_passes_timed_as_training_runs_them(tmp_path, monkeypatch,
                                                                          quiet_machine):
    """Training swaps PyTorch's Softplus for the fused one (robattr.train.fused): a step's
    passes are measured so (``kind|family|fused``), a notebook's own passes are not; a
    calibration without the fused figures falls back on the plain ones."""
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    measured = []

    def fake(kind, fam, device, fused=False):
        measured.append((kind, fused))
        return (1e-3, 1e-5) if not fused else (5e-4, 5e-6)

    monkeypatch.setattr(calibration, "_measure_pass", fake)
    sig = cost.step_signature(cost.zoo_config(cost.spec("digits", "mlp", "ce")))
    step = cost.Work("step", sig, 10)
    cal = calibration.calibrate([step, cost.grads(FAM, 4)], "cpu", notebook=False)
    assert ("grad", False) in measured and ("train", True) in measured
    assert ("train", False) not in measured
    assert all(k.endswith(calibration.FUSED) for k in calibration._step_keys(sig))
    (kind, calls, rows), = cost.step_passes(sig)
    assert cal.cost(step) == pytest.approx(10 * (calls * 5e-4 + rows * 5e-6))
    plain = fake_calibration()                        # measured before version 5: no fused keys
    plain.passes[f"train|{calibration._step_family(sig)}"] = (1e-3, 1e-5)
    assert plain.cost(step) == pytest.approx(10 * (calls * 1e-3 + rows * 1e-5))


def test_a_backward_pass_alone_never_costs_less_than_a_forward():
    """SSR's C input-gradient backwards are a gradient less its forward; a calibration whose
    fitted gradient is cheaper per row than its forward (two noisy fits) had priced a medium
    MNIST SSR epoch at -10 s. Now a backward costs at least a forward, and exactly the
    difference when that is larger."""
    sig = cost.step_signature(cost.zoo_config(cost.spec("digits", "cnn", "ssr")))
    assert {k.split("|")[0] for k in calibration._step_keys(sig)} == {"train", "grad", "fwd",
                                                                       "grad2"}
    kinds = dict((k, (c, r)) for k, c, r in cost.step_passes(sig))
    assert kinds["bwd"] == (10, 640.0)                  # C = 10 classes at the batch of 64
    step = cost.Work("step", sig, 1)
    cal = fake_calibration()
    for kind in calibration._PASSES:
        cal.passes[calibration._fused_key(kind, FAM)] = (1e-3, 1e-5)
    noisy = calibration._fused_key("grad", FAM)
    cal.passes[noisy] = (1e-3, 0.5e-5)                   # per row: cheaper than the forward
    fwd = 10 * 1e-3 + 640 * 1e-5
    others = (1e-3 + 64 * 1e-5) * 2                      # the CE step and the grad2, 1e-3 / 1e-5
    assert cal.cost(step) == pytest.approx(others + fwd)
    cal.passes[noisy] = (4e-3, 4e-5)                     # a backward three times the forward
    assert cal.cost(step) == pytest.approx(others + 3 * fwd)


def test_a_calibration_measured_on_a_busy_machine_is_used_but_not_cached(tmp_path, monkeypatch):
    """Measured under load (another training at one thread made every figure of a medium
    plan about twice too high), a calibration answers this plan, says why it may be off,
    and is measured again next time."""
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    monkeypatch.setattr(calibration.os, "getloadavg", lambda: (1.4, 1.0, 0.5))
    monkeypatch.setattr(calibration.os, "cpu_count", lambda: 2)
    assert calibration._busy(plan_device()) == "load 1.4 on 2 core(s)"
    assert calibration._busy(SimpleNamespace(type="cuda")) == ""
    monkeypatch.setattr(calibration, "_measure_pass", lambda k, f, d: (1e-3, 1e-5))
    said = []
    cal = calibration.calibrate([cost.grads(FAM, 4)], "cpu", notebook=False, log=said.append)
    assert cal.passes and "busy (load 1.4 on 2 core(s))" in said[0] and "not cached" in said[0]
    assert list(tmp_path.glob("plan/*.json")) == []
    monkeypatch.setattr(calibration.os, "getloadavg", lambda: (0.6, 1.0, 0.5))
    assert calibration._busy(plan_device()) == ""
    calibration.calibrate([cost.grads(FAM, 4)], "cpu", notebook=False)
    assert len(list((tmp_path / "plan").glob("*.json"))) == 1


def test_calibration_files_carry_the_calibration_version(tmp_path, monkeypatch):
    """A calibration measured the old way (all threads only, on a loaded machine: costs 10
    to 1000 times too high) is not read again: the version is in the file name."""
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    slug, _ = calibration._device_slug(plan_device())
    old = tmp_path / "plan" / f"calibration-{slug}.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"device": "cpu", "description": "old", "numpy": 1.0}))
    assert calibration._load_calibration(plan_device()).numpy is None
    version = calibration.CALIBRATION_VERSION
    assert calibration._calibration_path(slug).name.endswith(f"-v{version}.json")


@pytest.fixture
def two_threads():
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(old)


def test_a_cpu_calibration_is_the_faster_of_one_thread_and_all(monkeypatch, two_threads):
    """On a loaded CPU torch's threads wait for busy cores: a pass measured with two
    threads took 140 ms where one thread took 0.2 ms, and a calibration that timed only the
    full thread count put the quick profile at 4h17m for 21 minutes of runs. Every pass,
    training step and eigenproblem is timed with one thread too, and the faster counts."""
    import torch

    seen = []

    def timed(fn, sync, beat=None, **kw):
        n = torch.get_num_threads()
        seen.append(n)
        return 0.001 if n == 1 else 0.5             # the all-threads run is the slow one
    monkeypatch.setattr(calibration, "_timed", timed)
    t0, t1 = calibration._measure_pass("grad", "mlp:1x1x4:2", plan_device())
    assert t0 + 64 * t1 < 0.01 and set(seen) == {1, 2}
    t0, t1 = calibration._measure_pass("train", "mlp:1x1x4:2", plan_device())
    assert t0 + 64 * t1 < 0.01
    assert calibration._measure_eigh() < 0.01 / 384 ** 3 and calibration._measure_matmul() < 1e-9
    assert torch.get_num_threads() == 2                          # restored


def test_a_family_times_both_thread_counts_once_per_batch_size(monkeypatch, two_threads):
    """Inside one calibration the first pass of a family times one thread and all
    threads at each batch size; the family's other passes reuse the winner (half the
    timings of a cold ``robattr plan``), and a new calibration chooses again."""
    import torch

    seen = []

    def timed(fn, sync, beat=None, **kw):
        seen.append(torch.get_num_threads())
        return 0.001 if torch.get_num_threads() == 1 else 0.5
    monkeypatch.setattr(calibration, "_timed", timed)
    monkeypatch.setattr(calibration, "_winners", {})
    calibration._measure_pass("grad", "mlp:1x1x4:2", plan_device())
    assert sorted(seen) == [1, 1, 2, 2]                 # both counts, at 1 row and at a batch
    seen.clear()
    calibration._measure_pass("grad2", "mlp:1x1x4:2", plan_device())
    assert seen == [1, 1]                               # the winner only
    seen.clear()
    calibration._measure_pass("grad", "mlp:1x1x8:2", plan_device())
    assert sorted(seen) == [1, 1, 2, 2]                 # another family chooses for itself


def test_a_costly_pass_is_priced_per_row_from_one_row(monkeypatch):
    """A pass whose one row takes half of BIG_BATCH_SECONDS or more is not timed again at
    a larger batch: it costs its one-row time per row."""
    calls = []

    def timed(fn, sync, beat=None, **kw):
        calls.append(1)
        return calibration.BIG_BATCH_SECONDS
    monkeypatch.setattr(calibration, "_timed", timed)
    monkeypatch.setattr(calibration, "_winners", {})
    t0, t1 = calibration._measure_pass("grad", "mlp:1x1x4:2", plan_device())
    assert t1 == calibration.BIG_BATCH_SECONDS and t0 < 1e-5
    assert len(calls) <= 2                              # the one-row timing(s) only


def test_timed_takes_the_minimum_and_stops_when_it_cannot_win(monkeypatch):
    clock = [0.0]

    def runs(*seconds):                     # a function whose n-th call takes seconds[n]
        it = iter(seconds)

        def fn():
            clock[0] += next(it)
        return fn
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: clock[0])
    # warm-up (9 s, not counted), then at least 3 runs, more within the budget, at most 5
    assert calibration._timed(runs(9, 5, 1, 3, 2, 4), lambda: None, budget=100.0, most=5) == 1.0
    assert calibration._timed(runs(9, 5, 1, 3, 2, 4), lambda: None, budget=8.0, most=5) == 1.0
    # a warm-up longer than the budget: one timed run is enough
    assert calibration._timed(runs(9, 5, 1), lambda: None, budget=2.0) == 5.0
    # another thread count already did it in 0.5 s: a first run of 3 s cannot win
    assert calibration._timed(runs(9, 3), lambda: None, budget=100.0, beat=0.5) == 3.0
    assert calibration._timed(runs(9, 0.8, 0.6, 0.7, 9, 9), lambda: None, budget=2.0,
                       beat=0.5) == pytest.approx(0.6)


def test_a_real_measurement_is_positive_and_grows_with_the_batch(monkeypatch, tmp_path):
    t0, t1 = calibration._measure_pass("grad", "mlp:1x1x4:2", plan_device())
    assert t0 > 0 and t1 >= 0
    t0, t1 = calibration._measure_pass("train", "mlp:1x1x4:2", plan_device())
    assert t0 > 0 and t1 >= 0


def plan_device():
    import torch

    return torch.device("cpu")


# ------------------------------------------------------------------ the plan
@pytest.fixture
def fake_costs(tmp_path, monkeypatch):
    """An empty zoo in a temporary cache and a calibration that measures nothing."""
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ROBATTR_TRAIN_SIZE", raising=False)
    monkeypatch.chdir(ROOT)

    def fake(works, device="auto", **kw):
        cal = fake_calibration()
        for w in works:
            if w.kind in calibration._PASSES:
                cal.passes.setdefault(f"{w.kind}|{w.family}", (1e-3, 1e-5))
            elif w.kind == "step":
                for key in calibration._step_keys(w.family):
                    cal.passes.setdefault(key, (1e-3, 1e-5))
        return cal

    monkeypatch.setattr(plan, "calibrate", fake)
    monkeypatch.setattr(plan_check, "calibrate", fake)
    return tmp_path


def cache_model(cfg, seconds_per_epoch=1.5, **meta):
    """Put zoo files for a configuration in the (temporary) zoo, as if it were trained."""
    key = plan._zoo_key(cfg)
    wpath, jpath = zoo.paths(key)
    wpath.write_bytes(b"weights")
    jpath.write_text(json.dumps({"key": key, "config": cfg, "seconds_per_epoch": seconds_per_epoch,
                                 "device_name": "a test CPU", **meta}))


def smoke_params(key, profile="quick"):
    nb = notebooks.find(key, notebooks.discover(ROOT))
    return profiles.resolve(nb, profiles.load_profile(profile))


def test_plan_splits_models_into_cached_train_and_shared(fake_costs):
    p = plan.plan(ROOT, "quick", only="example/*")
    by = {nb.key: nb for nb in p.notebooks}
    # the three example notebooks share their CE model: the first in the plan trains it
    first, second = by["example/attacks_and_defenses"], by["example/digits_saliency"]
    assert [m.status for m in first.models] == ["train"] * len(first.models)
    assert [m.status for m in second.models] == ["shared"] and second.train_seconds == 0
    assert by["example/attribution_methods"].models[0].status == "shared"
    cfg = first.models[0].config
    steps = cfg["epochs"] * math.ceil(cost.TRAIN_SIZES["digits"] / cfg["batch_size"])
    assert first.models[0].steps == steps
    step = 1e-3 + cfg["batch_size"] * 1e-5                     # a CE step: one "train" pass
    assert first.models[0].seconds == pytest.approx(steps * step + 1e-3 * 2 + 360 * 1e-5)
    cache_model(cfg, test_acc=0.97)
    replanned = plan.plan(ROOT, "quick", only="example/*")
    again = {nb.key: nb for nb in replanned.notebooks}
    m = again["example/digits_saliency"].models[0]
    assert m.status == "cached" and m.recorded_seconds_per_epoch == 1.5
    assert m.recorded_device == "a test CPU" and m.recorded_test_acc == 0.97
    # --models: a cached model's recorded accuracy against its target (digits has none)
    assert ("1.50 s/epoch recorded on a test CPU; test accuracy 97.0 %, no accuracy target for "
            "digits") in plan.format_table(replanned, models=True)
    cache_model(cfg, test_acc=0.97, cpu_seconds_per_epoch=1.25, threads=1)
    assert "1.50 s/epoch recorded on a test CPU (CPU 1.25 s/epoch, 1 thread(s)); test accuracy" \
        in plan.format_table(plan.plan(ROOT, "quick", only="example/*"), models=True)
    assert p.seconds == pytest.approx(sum(nb.seconds for nb in p.notebooks))
    assert all(nb.data == {"digits": True} for nb in p.notebooks)


def test_plan_replays_models_as_trained(fake_costs):
    cfgs = plan.declared_models("example/digits_saliency", smoke_params("example/digits_saliency"))
    for cfg in cfgs:
        cache_model(cfg)
    keys = {plan._zoo_key(cfgs[0])}
    assert plan.plan(ROOT, only="example/digits_saliency").notebooks[0].models[0].status == "cached"
    replay = plan.plan(ROOT, only="example/digits_saliency", assume_trained=keys)
    assert replay.notebooks[0].models[0].status == "train"


def test_plan_says_which_data_is_missing(fake_costs, monkeypatch):
    monkeypatch.setenv("ROBATTR_DATA", str(fake_costs / "no-data"))
    p = plan.plan(ROOT, "paper", only="wangkong2025/attack_check")
    assert p.notebooks[0].data == {"mnist": False}
    text = plan.format_table(p)
    assert "mnist MISSING" in text and "data missing: mnist" in text
    assert f"looked under {fake_costs / 'no-data'}" in text
    d = p.to_dict()
    assert d["data_missing"] == ["mnist"] and json.loads(json.dumps(d)) == d


def test_the_table_lists_every_notebook_a_total_and_models_on_request(fake_costs):
    p = plan.plan(ROOT, "smoke", only="wangkong2025/*")
    text = plan.format_table(p, models=True)
    for nb in p.notebooks:
        assert nb.key in text
    assert text.splitlines()[-1].startswith("total: ")
    assert "train   digits cnn softplus(3) ce, 10 epochs" in text


def test_unknown_profile_and_empty_glob_are_errors(fake_costs, capsys):
    assert cli.main(["plan", "--profile", "no_such_profile"]) == 2
    assert "unknown profile 'no_such_profile'" in capsys.readouterr().err
    assert cli.main(["plan", "--only", "nothing/*"]) == 2
    assert "matches no notebook" in capsys.readouterr().err


def test_cli_plan_prints_json(fake_costs, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan", "--profile", "smoke", "--only", "example/digits_saliency",
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] == "smoke" and out["notebooks"][0]["key"] == "example/digits_saliency"
    assert out["notebooks"][0]["models"][0]["status"] == "train"


def test_count_figures(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("plt.show()\nx = 1\nplt.show()"),
                nbformat.v4.new_code_cell("viz.heatmap_grid(x, maps)"),
                nbformat.v4.new_code_cell("viz.set_theme()"),
                nbformat.v4.new_markdown_cell("plt.show()")]
    nbformat.write(nb, tmp_path / "a.ipynb")
    assert plan.count_figures(tmp_path / "a.ipynb") == 3


def test_check_run_replays_the_trainings_of_that_run(fake_costs):
    import nbformat

    key_ = "example/digits_saliency"
    cfg = plan.declared_models(key_, smoke_params(key_))[0]
    cache_model(cfg)
    key = plan._zoo_key(cfg)
    run = nbformat.v4.new_notebook()
    run.metadata["papermill"] = {"start_time": "2026-01-01T10:00:00",
                                 "end_time": "2026-01-01T10:00:30", "duration": 30.0}
    nbformat.write(run, fake_costs / "run.ipynb")
    log = zoo.zoo_dir() / "trainings.jsonl"
    log.write_text(json.dumps({"key": key, "created": "2026-01-01T10:00:10+00:00"}) + "\n")
    r = plan_check.check_run(ROOT, "example/digits_saliency", fake_costs / "run.ipynb")
    assert r["trained"] == 1 and r["actual"] == 30.0
    assert r["ratio"] == pytest.approx(r["estimate"] / 30)
    log.write_text(json.dumps({"key": key, "created": "2026-01-01T11:00:00+00:00"}) + "\n")
    again = plan_check.check_run(ROOT, "example/digits_saliency", fake_costs / "run.ipynb")
    assert again["trained"] == 0


def test_check_training_compares_this_devices_models_with_their_records(fake_costs):
    import platform

    here = platform.processor() or platform.machine()
    cfg = zoo.config("digits", "cnn", "ce", epochs=3)
    cache_model(cfg, seconds_per_epoch=[0.2, 0.4])
    other = zoo.config("digits", "mlp", "ce", epochs=3)
    cache_model(other)
    for c, name in ((cfg, here), (other, "another machine")):
        jpath = zoo.paths(plan._zoo_key(c))[1]
        meta = json.loads(jpath.read_text())
        jpath.write_text(json.dumps({**meta, "device": "cpu", "device_name": name}))
    rows = plan_check.check_training("cpu")
    assert [r["key"] for r in rows] == [plan._zoo_key(cfg)]        # the other machine's is left out
    steps = math.ceil(cost.TRAIN_SIZES["digits"] / cfg["batch_size"])
    assert rows[0]["estimate"] == pytest.approx(steps * (1e-3 + cfg["batch_size"] * 1e-5))
    assert rows[0]["recorded"] == pytest.approx(0.3)
    assert rows[0]["ratio"] == pytest.approx(rows[0]["estimate"] / 0.3)
    text = plan_check.format_training_check(rows, full=True)
    assert "1 zoo model(s)" in text and "digits cnn ce, 3 epochs" in text
    assert "no model" in plan_check.format_training_check([])


def test_check_training_prices_each_model_on_the_threads_it_trained_with(fake_costs, monkeypatch):
    import platform

    import torch

    here = platform.processor() or platform.machine()
    seen = []

    def by_threads(works, device="auto", **kw):
        # a calibration whose step costs scale with 1 / threads, as a CPU-bound step's do
        n = torch.get_num_threads()
        seen.append(n)
        cal = fake_calibration()
        for w in works:
            for key in calibration._step_keys(w.family):
                cal.passes[key] = (1e-3 / n, 1e-5 / n)
        return cal

    monkeypatch.setattr(plan_check, "calibrate", by_threads)
    one = zoo.config("digits", "cnn", "ce", epochs=3)
    two = zoo.config("digits", "cnn", "ce", epochs=3, seed=1)
    none = zoo.config("digits", "cnn", "ce", epochs=3, seed=2)
    for c, threads in ((one, 1), (two, 2), (none, None)):
        cache_model(c, seconds_per_epoch=1.0)
        jpath = zoo.paths(plan._zoo_key(c))[1]
        meta = json.loads(jpath.read_text())
        extra = {} if threads is None else {"threads": threads}
        jpath.write_text(json.dumps({**meta, "device": "cpu", "device_name": here, **extra}))
    before = torch.get_num_threads()
    rows = {r["key"]: r for r in plan_check.check_training("cpu")}
    assert torch.get_num_threads() == before                       # the thread count restored
    assert sorted(seen) == sorted([1, 2, before])                 # one calibration per count
    r1, r2, r0 = (rows[plan._zoo_key(c)] for c in (one, two, none))
    assert (r1["threads"], r2["threads"], r0["threads"]) == (1, 2, None)
    assert r1["estimate"] == pytest.approx(2 * r2["estimate"])     # one thread: twice two's
    assert "(1 thread(s))" in plan_check.format_training_check(list(rows.values()), full=True)


def test_format_check_marks_runs_made_with_other_parameters():
    rows = [{"key": "a/b", "estimate": 10.0, "actual": 10.0, "ratio": 1.0, "trained": 0,
             "params_changed": True}]
    text = plan_check.format_check(rows, "quick")
    assert "a/b*" in text and "changed since that run" in text


def test_format_check_flags_ratios_outside_a_factor_of_three():
    rows = [{"key": "a/b", "estimate": 10.0, "actual": 40.0, "ratio": 0.25, "trained": 0},
            {"key": "a/c", "estimate": 10.0, "actual": 10.0, "ratio": 1.0, "trained": 1}]
    text = plan_check.format_check(rows, "quick")
    assert "a/b" in text and text.count("outside [1/3, 3]") == 1
    assert "1 of 2 within a factor of 3" in text
    assert "no notebook" in plan_check.format_check([], "quick")


# ------------------------------------------------------------------ dataset presence
def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


MNIST = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")


@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_available_mnist_needs_all_four_raw_files(tmp_path, name, folder):
    assert not data.available(name, tmp_path)
    for f in MNIST[:3]:
        touch(tmp_path / folder / "raw" / f)
    assert not data.available(name, tmp_path)
    touch(tmp_path / folder / "raw" / MNIST[3])
    assert data.available(name, tmp_path)


def test_available_cifar10_pickles_or_jpeg_tree(tmp_path):
    assert not data.available("cifar10", tmp_path)
    (tmp_path / "cifar10-jpg" / "train").mkdir(parents=True)
    assert not data.available("cifar10", tmp_path)
    (tmp_path / "cifar10-jpg" / "test").mkdir()
    assert data.available("cifar10", tmp_path)
    pickles = tmp_path / "cifar-10-batches-py"
    touch(pickles / "data_batch_1")                 # load() then reads the pickles only
    assert not data.available("cifar10", tmp_path)
    for f in [f"data_batch_{i}" for i in range(2, 6)] + ["test_batch", "batches.meta"]:
        touch(pickles / f)
    assert data.available("cifar10", tmp_path)


def test_available_flowers_folders_digits_and_root(tmp_path, monkeypatch):
    assert not data.available("flowers102", tmp_path)
    (tmp_path / "flowers-102" / "jpg").mkdir(parents=True)
    touch(tmp_path / "flowers-102" / "imagelabels.mat")
    assert not data.available("flowers102", tmp_path)
    touch(tmp_path / "flowers-102" / "setid.mat")
    assert data.available("flowers102", tmp_path)
    assert data.available("digits", tmp_path / "nowhere")
    assert data.available(str(tmp_path)) and not data.available(str(tmp_path / "missing"))
    monkeypatch.setenv("ROBATTR_DATA", str(tmp_path))      # the default root
    assert data.available("flowers102") and not data.available("mnist")


# ------------------------------------------------------------------ declarations against runs
# tests/book/test_book.py::test_every_notebook_asks_the_zoo_for_exactly_its_declared_models checks
# every declaration against the smoke build's zoo requests (robattr.zoo.request_log).


def _nbplan(key, seconds, models=()):
    cfg = {"dataset": "digits", "arch": "cnn", "activation": "relu", "method": "ce", "epochs": 1}
    return plan.NotebookPlan(key, "cpu", {}, [plan.ModelPlan(k, cfg, s) for k, s in models],
                             train_seconds=0.0, work_seconds=seconds, fixed_seconds=0.0,
                             figures=0, reference="n/a", work=[])


def test_wall_seconds_schedules_notebooks_on_workers_and_waits_for_shared_models():
    # a trains model m (100 s); b (10 s) needs m; c (50 s) and d (40 s) need nothing
    p = plan.Plan("x", [_nbplan("a", 100, [("m", "train")]), _nbplan("b", 10, [("m", "shared")]),
                        _nbplan("c", 50), _nbplan("d", 40)], [])
    assert p.wall_seconds(1) == p.seconds == 200
    # two workers: a on w1 [0, 100]; b on w2 waits for a: [100, 110]; c on w1 [100, 150];
    # d on w2 [110, 150]
    assert p.wall_seconds(2) == pytest.approx(150)
    assert p.wall_seconds(4) == pytest.approx(110)     # b still waits for a
    assert p.wall_seconds(2) >= max(nb.seconds for nb in p.notebooks)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            p.wall_seconds(bad)
    text = plan.format_table(p, jobs=2)
    assert "robattr build --jobs 2 (notebooks 2 at a time" in text
    assert "robattr train --jobs 2" in text       # a trains m: train it first, then build
    assert "--jobs" not in plan.format_table(p)


def test_train_then_build_with_workers_schedules_models_then_the_notebooks_work():
    # models m (100 s) and n (60 s); s (30 s) learns from m (ATEX's teacher); notebooks'
    # own work 10, 50 and 40 s
    def nbp(key, work, models):
        nb = _nbplan(key, work)
        nb.models = models
        return nb

    cfg = {"dataset": "digits", "arch": "cnn", "activation": "relu", "method": "ce",
           "epochs": 1}
    m = plan.ModelPlan("m", cfg, "train", 100.0)
    n = plan.ModelPlan("n", cfg, "train", 60.0)
    s = plan.ModelPlan("s", {**cfg, "method": "atex", "loss": {"teacher": "m"}}, "train", 30.0)
    p = plan.Plan("x", [nbp("a", 10, [m, s]), nbp("b", 50, [n, plan.ModelPlan("m", cfg, "shared")]),
                        nbp("c", 40, [])], [])
    # one worker: 190 s of models; two: m [0, 100] and n [0, 60]; s waits for m: [100, 130]
    assert p.train_first_seconds(1) == (pytest.approx(190), pytest.approx(100))
    assert p.train_first_seconds(2) == (pytest.approx(130), pytest.approx(50))
    j = plan.jobs_seconds(p, 2)
    assert (j["train"], j["then_build"], j["jobs"]) == (pytest.approx(130), pytest.approx(50), 2)
    assert j["threads_per_worker"] == plan.worker_threads(2) >= 1
    assert plan.worker_threads(10 ** 6) == 1
    text = plan.format_table(p, jobs=2)
    assert "then robattr build --jobs 2: about 3m00s of wall time (training 2m10s" in text


def test_schedule_starts_a_student_after_its_teacher():
    from robattr.book.plan import schedule
    from robattr.book.pretrain import Pending

    def model(key, **loss):
        return Pending(key, {"loss": loss}, "nb", "cpu")

    todo = [model("t"), model("c"), model("s", teacher="t")]
    secs = {"t": 10.0, "c": 1.0, "s": 5.0}
    assert schedule(todo, secs, 1) == 16.0
    assert schedule(todo, secs, 2) == 15.0         # s waits for t although a worker is free at 1
    assert schedule(todo, secs, 3) == 15.0
    assert schedule([], secs, 2) == 0.0
    with pytest.raises(ValueError, match="teachers that nothing trains"):
        schedule([model("a", teacher="b"), model("b", teacher="a")], {}, 2)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="jobs"):
            schedule(todo, secs, bad)


def test_a_plan_priced_on_fewer_threads_calibrates_on_them(fake_costs, monkeypatch):
    import torch

    seen = []
    real = plan.calibrate
    monkeypatch.setattr(plan, "calibrate",
                        lambda works, dev, **kw: seen.append(torch.get_num_threads()) or
                        real(works, dev, **kw))
    before = torch.get_num_threads()
    plan.plan(ROOT, "smoke", only="example/digits_saliency", threads=1)
    assert seen == [1] and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        plan.plan(ROOT, "smoke", only="example/digits_saliency", threads=0)


def test_plan_json_with_jobs_gives_the_workers_wall_times(fake_costs, capsys):
    assert cli.main(["plan", "--profile", "smoke", "--only", "example/*", "--jobs", "2",
                     "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    w = d["with_jobs"]
    assert w["jobs"] == 2 and w["train"] > 0 and w["build"] > 0 and w["then_build"] > 0


def test_training_estimate_caps_train_size_at_the_split():
    # the zoo trains on the whole split when train_size exceeds it: so does the estimate
    small = zoo.config("digits", "cnn", "ce", epochs=1, train_size=1000)
    big = zoo.config("digits", "cnn", "ce", epochs=1, train_size=20000)
    assert plan._n_train(small) == 1000
    assert plan._n_train(big) == cost.TRAIN_SIZES["digits"] == plan._n_train(
        zoo.config("digits", "cnn", "ce", epochs=1))


def test_atex_teacher_key_is_the_ce_model_the_profile_trains():
    # the paper profile trains CIFAR-10 with its recipe (crop+flip): the ATEX row's teacher
    # must be that CE model's key, as in the notebook's kernel (profile_env)
    prof = profiles.load_profile("paper")
    nb = next(n for n in notebooks.discover() if n.key == "joo2023/table1_robustness")
    params = profiles.resolve(nb, prof)
    if "ATEX" not in params.get("baselines", []):
        pytest.skip("the paper profile trains no ATEX row")
    cfgs = plan.declared_models(nb.key, params, profiles.effective_train_size(prof, nb.key),
                                profiles.effective_recipe(prof))
    # the CE at seed 0 (the table's; the other seeds measure the seed-to-seed spread)
    ce = [c for c in cfgs if c["method"] == "ce" and c["arch"] == params["arch"] and c["seed"] == 0]
    atex = [c for c in cfgs if c["method"] == "atex" and c["arch"] == params["arch"]]
    assert len(ce) == 1 and len(atex) == 1 and ce[0].get("augment") == "crop+flip"
    assert atex[0]["loss"]["teacher"] == zoo._key(ce[0])


# ------------------------------------------------------------------ partly trained, robattr train
def test_plan_counts_only_the_epochs_a_checkpoint_does_not_hold(fake_costs):
    from robattr.zoo import store

    whole = plan.plan(ROOT, "quick", only="example/digits_saliency").notebooks[0].models[0]
    cfg = whole.config
    store.checkpoint(whole.key, cfg).write({"epoch": 2})
    part = plan.plan(ROOT, "quick", only="example/digits_saliency")
    m = part.notebooks[0].models[0]
    assert (m.status, m.epochs_done) == ("train", 2)
    assert m.steps * cfg["epochs"] == whole.steps * (cfg["epochs"] - 2)
    assert f"(partly trained: 2 of {cfg['epochs']} epochs done)" in plan.format_table(part, True)
    (listed,) = zoo.partly_trained()
    assert (listed["key"], listed["epochs_done"], listed["config"]) == (whole.key, 2, cfg)


def test_a_build_names_the_partly_trained_models_it_resumes_and_only_counts_the_others(
        fake_costs):
    from robattr.book import builder
    from robattr.zoo import store

    only = "example/digits_saliency"
    nb = plan.plan(ROOT, "quick", only=only).notebooks[0]
    wanted = nb.models[0]
    store.checkpoint(wanted.key, wanted.config).write({"epoch": 2})
    orphan = {**wanted.config, "epochs": wanted.config["epochs"] + 7}   # a changed recipe
    store.checkpoint(zoo._key(orphan), orphan).write({"epoch": 1})
    prof = profiles.load_profile("quick")
    (note,) = [n for n in notebooks.discover(ROOT) if n.key == only]
    todo = {only: (note, profiles.resolve(note, prof))}
    keys = builder._wanted_keys(todo, prof)
    assert wanted.key in keys and zoo._key(orphan) not in keys
    said = []
    builder._log_partly_trained(said.append, "goes on", keys)
    assert said == [f"partly trained: digits cnn ce ({wanted.key[:12]}), 2 of "
                    f"{wanted.config['epochs']} epochs: goes on",
                    "1 partly trained checkpoint(s) in the zoo belong to no model these "
                    "notebooks ask for (left by a changed configuration): not resumed"]
    said.clear()
    builder._log_partly_trained(said.append, "goes on")          # no selection: every one
    assert len(said) == 2 and all(line.startswith("partly trained") for line in said)


def test_robattr_train_trains_what_the_notebooks_ask_for(tmp_path, monkeypatch, capsys):
    from robattr.book import pretrain

    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    only = "example/digits_saliency"
    (todo,) = pretrain.pending(ROOT, "smoke", only)
    assert todo.config == plan.declared_models(only, smoke_params(only, "smoke"),
                                               profiles.effective_train_size(
                                                   profiles.load_profile("smoke"), only))[0]
    import torch

    threads = torch.get_num_threads()
    try:
        assert cli.main(["--root", str(ROOT), "train", "--profile", "smoke", "--only", only,
                         "--threads", "1", "--no-progress"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "1 model(s) to train" in out and "test accuracy" in out
    assert pretrain.pending(ROOT, "smoke", only) == []
    assert zoo.info("digits", "cnn", **{k: todo.config[k] for k in ("epochs", "lr", "seed")},
                    batch_size=todo.config["batch_size"]) is not None
    assert cli.main(["--root", str(ROOT), "train", "--threads", "0"]) == 2


def test_robattr_train_jobs_trains_models_at_once_in_processes(tmp_path, monkeypatch, capsys):
    from robattr.book import pretrain

    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    only = "example/*i*"              # digits_saliency and attribution_methods: two CE CNNs
    todo = pretrain.pending(ROOT, "smoke", only)
    assert len(todo) >= 2
    said = []
    assert pretrain.pretrain(ROOT, "smoke", only, jobs=2, threads=1, log=said.append) == len(todo)
    assert f"{len(todo)} model(s) to train" in said[0] and "2 at a time" in said[0]
    assert sum("done in" in line and "test accuracy" in line for line in said) == len(todo)
    assert pretrain.pending(ROOT, "smoke", only) == []
    with pytest.raises(ValueError, match="jobs"):
        pretrain.pretrain(ROOT, "smoke", only, jobs=0)
    assert cli.main(["--root", str(ROOT), "train", "--jobs", "0"]) == 2


def test_cheapest_first_trains_the_quick_models_first_and_a_teacher_before_its_student():
    from robattr.book.pretrain import Pending, cheapest_first

    def model(key, **loss):
        return Pending(key, {"loss": loss}, "nb", "cpu")

    teacher, student = model("t"), model("s", teacher="t", lam=3.0)
    cheap, dear, unknown = model("c"), model("d"), model("u")
    todo = [dear, student, unknown, cheap, teacher]
    seconds = {"t": 50.0, "s": 10.0, "c": 1.0, "d": 100.0}
    order = [m.key for m in cheapest_first(todo, seconds)]
    assert order == ["c", "t", "s", "d", "u"]          # the teacher jumps ahead of its student
    assert [m.key for m in cheapest_first([student], seconds)] == ["s"]   # a teacher already cached
    with pytest.raises(ValueError, match="teachers"):
        cheapest_first([model("a", teacher="b"), model("b", teacher="a")], {})


def test_robattr_train_orders_by_the_plans_estimates_when_asked(fake_costs, monkeypatch):
    from robattr.book import pretrain

    with pytest.raises(ValueError, match="order must be"):
        pretrain.pretrain(ROOT, "smoke", "example/*", order="alphabetical")
    trained = []
    monkeypatch.setattr(zoo, "get_config", lambda cfg, **kw: trained.append(cfg) or
                        SimpleNamespace(zoo_meta={"test_acc": 0.5}))
    said = []
    p = plan.plan(ROOT, "smoke", "example/*")
    seconds = {m.key: m.seconds for nb in p.notebooks for m in nb.models if m.status == "train"}
    n = pretrain.pretrain(ROOT, "smoke", "example/*", order="cheapest", log=said.append)
    got = [seconds[plan._zoo_key(c)] for c in trained]
    assert n == len(seconds) == len(got) > 1 and got == sorted(got) and len(set(got)) > 1
