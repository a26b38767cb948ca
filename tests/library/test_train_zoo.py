"""Tests for robattr.train (fit, evaluate, the loss protocol) and robattr.zoo (the cache)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import time

import pytest
import torch
from torch import nn

from robattr import data, train, utils, zoo
from robattr.models import build
from robattr.zoo import lock as zoo_lock
from robattr.train import LOSSES, CrossEntropy, Loss, evaluate, fit, make_loss, register_loss

FAST = dict(epochs=2, batch_size=128)  # a digits mlp in ~0.1 s


@pytest.fixture(scope="module")
def digits():
    return data.load("digits", "train"), data.load("digits", "test")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "zoo"


@pytest.fixture
def fit_calls(monkeypatch):
    """Count calls of train.fit (the zoo looks it up at call time)."""
    calls = []
    real = train.fit

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(train, "fit", counting)
    return calls


def _state(model):
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _entries(cache):
    """The model files of the zoo folder (the training log aside)."""
    return sorted(p.name for p in cache.iterdir() if p.name != "trainings.jsonl")


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- fit / evaluate
def test_fit_cnn_digits_reaches_good_accuracy(digits):
    train_set, test_set = digits
    torch.manual_seed(0)
    model = build("cnn", "digits")
    hist = fit(model, train_set, epochs=8, batch_size=64, seed=0, progress=False)
    acc = evaluate(model, test_set)
    assert acc > 0.95
    assert hist.epochs == 8 and len(hist.train_acc) == len(hist.seconds) == 8
    assert hist.loss[-1] < hist.loss[0] / 3
    assert 0.9 < hist.train_acc[-1] <= 1.0
    assert all(s > 0 for s in hist.seconds) and hist.total_seconds == pytest.approx(sum(hist.seconds))
    assert not model.training
    assert list(hist.to_frame().columns[:4]) == ["loss", "train_acc", "seconds", "lr"]


def test_fit_is_deterministic(digits):
    states = []
    for _ in range(2):
        torch.manual_seed(1)
        model = build("mlp", "digits")
        fit(model, digits[0], seed=3, progress=False, **FAST)
        states.append(_state(model))
    assert _same(*states)


def test_fit_tensors_sgd_milestones(digits):
    X, y = data.as_tensors(digits[0])
    model = build("mlp", "digits")
    hist = fit(model, (X, y), epochs=3, lr=0.1, optimizer="sgd", milestones=[1, 2],
               batch_size=256, progress=False)
    assert hist.lr == pytest.approx([0.1, 0.01, 0.001])
    assert evaluate(model, (X, y)) > 0.5


def test_fit_rejects_bad_arguments(digits):
    model = build("mlp", "digits")
    with pytest.raises(ValueError, match="optimizer"):
        fit(model, digits[0], optimizer="lbfgs", progress=False)
    with pytest.raises(ValueError, match="epochs"):
        fit(model, digits[0], epochs=0, progress=False)
    with pytest.raises(ValueError, match="unknown loss"):
        fit(model, digits[0], loss="nope", progress=False)


def test_fit_divergence_is_reported(digits):
    class NanLoss(Loss):
        name = "nan_test"

        def __call__(self, model, x, y):
            return model(x).sum() * float("nan"), {}

    with pytest.raises(FloatingPointError, match="diverged"):
        fit(build("mlp", "digits"), digits[0], loss=NanLoss(), epochs=1, progress=False)


def test_evaluate_range_and_mode(digits):
    model = build("mlp", "digits").train()
    acc = evaluate(model, digits[1], batch_size=100)
    assert isinstance(acc, float) and 0.0 <= acc <= 1.0
    assert model.training


# --------------------------------------------------------------------------- loss protocol
def test_ce_loss_protocol(digits):
    loss = make_loss("ce")
    assert isinstance(loss, CrossEntropy) and LOSSES["ce"] is CrossEntropy
    assert loss.name == "ce" and loss.hparams == {} and loss.config() == {"name": "ce"}
    X, y = data.as_tensors(digits[0], n=32)
    value, logs = loss(build("mlp", "digits"), X, y)
    assert value.ndim == 0 and value.requires_grad
    assert set(logs) == {"ce", "acc"} and 0 <= float(logs["acc"]) <= 1
    assert make_loss(loss) is loss


def test_make_loss_rejects_unknown():
    with pytest.raises(ValueError, match="unknown loss"):
        make_loss("nope")
    with pytest.raises(ValueError, match="no hyper-parameter 'lam'"):
        make_loss("ce", lam=1.0)


def test_custom_loss_slots_in(digits, monkeypatch):
    monkeypatch.setattr(train, "LOSSES", dict(LOSSES))

    @register_loss
    class ScaledCE(Loss):
        name = "scaled_ce_test"
        defaults = {"lam": 1.0, "steps": 1}

        def __call__(self, model, x, y):
            logits = model(x)
            ce = nn.functional.cross_entropy(logits, y)
            return self.lam * ce, {"ce": ce.detach(), "acc": self.accuracy(logits, y),
                                   "lam": self.lam}

    loss = make_loss("scaled_ce_test", lam=2)
    assert loss.hparams == {"lam": 2.0, "steps": 1} and isinstance(loss.lam, float)
    assert loss.config() == {"name": "scaled_ce_test", "lam": 2.0, "steps": 1}
    hist = fit(build("mlp", "digits"), digits[0], loss=loss, progress=False, **FAST)
    assert hist.logs[0]["lam"] == 2.0 and hist.loss[0] == pytest.approx(2 * hist.logs[0]["ce"])

    with pytest.raises(ValueError, match="reserved"):
        @register_loss
        class Bad(Loss):
            name = "bad_test"
            defaults = {"beta": 6.0}


# --------------------------------------------------------------------------- zoo: keys
def test_config_hash_is_canonical(cache):
    h = zoo.config_hash("digits", "mlp")
    assert len(h) == 64 and h == zoo.config_hash("digits", "mlp", "ce")
    assert h == zoo.config_hash("digits", "mlp", epochs=zoo.DEFAULTS["epochs"], seed=0,
                                activation="relu", beta=None)
    assert zoo.config_hash("digits", "mlp", lr=1) == zoo.config_hash("digits", "mlp", lr=1.0)
    cfg = zoo.config("digits", "mlp")
    canon = json.dumps(cfg, sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(canon.encode()).hexdigest() == h
    assert cfg["zoo_format"] == zoo.ZOO_FORMAT and cfg["loss"] == {}
    variants = [dict(seed=1), dict(epochs=3), dict(lr=2e-3), dict(batch_size=32),
                dict(optimizer="sgd"), dict(weight_decay=1e-4), dict(milestones=[5]),
                dict(activation="softplus", beta=3.0)]
    hashes = {zoo.config_hash("digits", "mlp", **v) for v in variants}
    hashes |= {zoo.config_hash("digits", "cnn"), zoo.config_hash("mnist", "mlp"),
               zoo.config_hash("digits", "mlp", activation="softplus", beta=10.0)}
    assert len(hashes) == len(variants) + 3 and h not in hashes


def test_config_rejects_bad_values(cache):
    for kwargs in (dict(activation="softplus"), dict(beta=3.0), dict(epochs=0),
                   dict(lr=-1.0), dict(seed=-1), dict(optimizer="rmsprop"), dict(lam=1.0)):
        with pytest.raises(ValueError):
            zoo.config_hash("digits", "mlp", **kwargs)
    with pytest.raises(ValueError, match="arch"):
        zoo.config_hash("digits", "vgg")


# --------------------------------------------------------------------------- zoo: cache
def test_cache_hit_does_not_train(cache, fit_calls):
    m1 = zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert len(fit_calls) == 1
    files = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    m2 = zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert len(fit_calls) == 1
    assert m2 is not m1 and not m2.training
    assert _same(_state(m1), _state(m2))
    assert m2.zoo_meta == m1.zoo_meta
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == files
    x = torch.rand(4, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(m1(x), m2(x))


def test_config_change_makes_new_entry(cache, fit_calls):
    a = zoo.get_model("digits", "mlp", progress=False, **FAST)
    b = zoo.get_model("digits", "mlp", progress=False, seed=1, **FAST)
    c = zoo.get_model("digits", "mlp", progress=False, epochs=1, batch_size=128)
    assert len(fit_calls) == 3
    keys = {m.zoo_meta["key"] for m in (a, b, c)}
    assert len(keys) == 3
    assert _entries(cache) == sorted(f"{k}.{ext}" for k in keys for ext in ("json", "safetensors"))
    assert not _same(_state(a), _state(b))
    df = zoo.list_models()
    assert set(df["key"]) == keys and set(df["seed"]) == {0, 1} and set(df["epochs"]) == {1, 2}


def test_get_models_is_get_model_per_spec_in_order(cache, fit_calls):
    """A notebook's declared specs (robattr.cost.spec dicts) give the models get_model gives
    for the same arguments, labelled and in the declared order; shared arguments reach
    every call; a spec without dataset/arch, or a key given twice, is refused."""
    from robattr.cost import spec

    specs = {"seed 1": spec("digits", "mlp", seed=1, **FAST),
             "plain": spec("digits", "mlp", **FAST)}
    got = zoo.get_models(specs, progress=False)
    assert list(got) == ["seed 1", "plain"] and len(fit_calls) == 2
    assert got["plain"].zoo_meta["key"] == zoo.get_model("digits", "mlp", progress=False,
                                                         **FAST).zoo_meta["key"]
    assert got["seed 1"].zoo_meta["key"] == zoo.config_hash("digits", "mlp", seed=1, **FAST)
    assert len(fit_calls) == 2                                    # the third call was a hit
    with pytest.raises(ValueError, match="arch"):
        zoo.get_models({"x": {"dataset": "digits"}})
    with pytest.raises(ValueError, match="seed"):
        zoo.get_models({"x": spec("digits", "mlp", seed=1)}, seed=2)


def test_retrain_flag(cache, fit_calls):
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    zoo.get_model("digits", "mlp", progress=False, retrain=True, **FAST)
    assert len(fit_calls) == 2


def _flip_byte(path):
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _rewrite_weights(wpath, jpath, payload: bytes):
    """Replace the weights AND fix the recorded sha256, so only deeper checks can catch it."""
    wpath.write_bytes(payload)
    meta = json.loads(jpath.read_text())
    meta["weights_sha256"] = hashlib.sha256(payload).hexdigest()
    jpath.write_text(json.dumps(meta))


def _wrong_keys(wpath, jpath):
    from safetensors.torch import save

    _rewrite_weights(wpath, jpath, save({"weight": torch.zeros(3)}))


def _wrong_shapes(wpath, jpath):
    from safetensors.torch import load_file, save

    state = load_file(wpath)
    k = next(k for k in state if k.endswith("weight") and state[k].ndim == 2)
    state[k] = torch.zeros(state[k].shape[0] + 1, state[k].shape[1])
    _rewrite_weights(wpath, jpath, save(state))


CORRUPTIONS = {
    "truncated weights": (lambda w, j: w.write_bytes(w.read_bytes()[: w.stat().st_size // 2]),
                          "sha256"),
    "flipped byte": (lambda w, j: _flip_byte(w), "sha256"),
    "garbage json": (lambda w, j: j.write_text("{not json"), "unreadable"),
    "json not an object": (lambda w, j: j.write_text("[1, 2]"), "not a JSON object"),
    "json missing": (lambda w, j: j.unlink(), "metadata file is missing"),
    "weights missing": (lambda w, j: w.unlink(), "weights file is missing"),
    "config tampered": (lambda w, j: j.write_text(json.dumps(
        {**json.loads(j.read_text()), "config": {"arch": "cnn"}})), "does not match"),
    "garbage with matching sha": (lambda w, j: _rewrite_weights(w, j, b"\x08" + b"\0" * 40),
                                  "safetensors cannot read"),
    "wrong keys": (_wrong_keys, "keys or shapes"),
    "wrong shapes": (_wrong_shapes, "keys or shapes"),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corrupt_cache_is_detected_and_retrained(cache, fit_calls, monkeypatch, kind):
    corrupt, reason = CORRUPTIONS[kind]
    good = zoo.get_model("digits", "mlp", progress=False, **FAST)
    key = good.zoo_meta["key"]
    wpath, jpath = zoo.paths(key)
    corrupt(wpath, jpath)

    import safetensors.torch

    loaded, real_load = [], safetensors.torch.load_file
    monkeypatch.setattr(safetensors.torch, "load_file",
                        lambda *a, **k: loaded.append(a) or real_load(*a, **k))
    with pytest.warns(zoo.ZooCacheWarning, match=reason) as record:
        again = zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert str(wpath) in str(record[0].message)
    assert len(fit_calls) == 2  # retrained
    expect_loads = 1 if reason in ("safetensors cannot read", "keys or shapes") else 0
    assert len(loaded) == expect_loads  # a file failing its sha256 is never even parsed
    assert _same(_state(again), _state(good))  # same config, same seed: same weights
    # the new files are sound: the next call is a silent hit
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert len(fit_calls) == 2
    assert _entries(cache) == [f"{key}.json", f"{key}.safetensors"]


def test_atomic_write_leaves_no_temp_files(cache, monkeypatch):
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert all(not p.name.startswith(".") and not p.name.endswith(".tmp")
               for p in cache.iterdir())

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(zoo.json, "dump", boom)  # fail while writing the metadata
    with pytest.raises(OSError, match="disk full"):
        zoo.get_model("digits", "mlp", progress=False, seed=7, **FAST)
    key = zoo.config_hash("digits", "mlp", seed=7, **FAST)
    names = sorted(p.name for p in cache.iterdir())
    assert not any(n.endswith(".tmp") or n.startswith(".") for n in names)
    assert f"{key}.safetensors" in names and f"{key}.json" not in names  # weights first
    monkeypatch.undo()
    monkeypatch.setenv("ROBATTR_CACHE", str(cache.parent))
    with pytest.warns(zoo.ZooCacheWarning, match="metadata file is missing"):
        zoo.get_model("digits", "mlp", progress=False, seed=7, **FAST)


def test_metadata_content(cache, digits):
    model = zoo.get_model("digits", "mlp", progress=False, **FAST)
    meta = model.zoo_meta
    key = zoo.config_hash("digits", "mlp", **FAST)
    assert meta["key"] == key and meta == zoo.info("digits", "mlp", **FAST)
    assert meta["config"] == zoo.config("digits", "mlp", **FAST)
    assert meta["config"]["epochs"] == 2 and meta["config"]["dataset"] == "digits"
    wpath, jpath = zoo.paths(key)
    assert meta["weights_sha256"] == hashlib.sha256(wpath.read_bytes()).hexdigest()
    assert meta["weights_file"] == wpath.name and meta["weights_bytes"] == wpath.stat().st_size
    assert meta["test_acc"] == pytest.approx(evaluate(model, digits[1]))
    assert 0 < meta["seconds_per_epoch"] and 0 < meta["train_seconds"]
    assert 0 < meta["cpu_seconds_per_epoch"] and meta["threads"] == torch.get_num_threads()
    assert len(meta["history"]["loss"]) == len(meta["history"]["cpu_seconds"]) == 2
    assert meta["torch_version"] == torch.__version__
    import robattr

    assert meta["robattr_version"] == robattr.__version__
    assert dt.datetime.fromisoformat(meta["created"]).tzinfo is not None
    assert meta["num_params"] == sum(p.numel() for p in model.parameters())
    assert json.loads(jpath.read_text()) == meta
    assert zoo.info("digits", "mlp", seed=5, **FAST) is None


def test_list_models_empty_and_skips_garbage(cache):
    df = zoo.list_models()
    assert len(df) == 0 and "test_acc" in df.columns
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    (cache / "junk.json").write_text("{oops")
    df = zoo.list_models()
    assert len(df) == 1 and df.loc[0, "arch"] == "mlp" and not math.isnan(df.loc[0, "test_acc"])


def test_softplus_model_in_zoo(cache):
    model = zoo.get_model("digits", "mlp", activation="softplus", beta=3, progress=False, **FAST)
    assert all(isinstance(m, nn.Softplus) and m.beta == 3.0
               for m in model.modules() if isinstance(m, (nn.ReLU, nn.Softplus)))
    assert model.zoo_meta["config"]["activation"] == "softplus"
    assert model.zoo_meta["config"]["beta"] == 3.0
    again = zoo.get_model("digits", "mlp", activation="softplus", beta=3.0, progress=False, **FAST)
    assert again.activation == "softplus" and again.beta == 3.0
    with pytest.raises(ValueError, match="beta"):
        zoo.get_model("digits", "mlp", activation="softplus", progress=False, **FAST)


def test_get_model_device_cpu(cache):
    model = zoo.get_model("digits", "mlp", device="cpu", progress=False, **FAST)
    assert all(p.device.type == "cpu" for p in model.parameters())


# ----------------------------------------------------------------------- sharing the zoo
def _train_in_subprocess(cache_root: str, barrier_file: str) -> str:
    import os
    import time as _time

    os.environ["ROBATTR_CACHE"] = cache_root
    torch.set_num_threads(1)
    from robattr import data as d
    from robattr import zoo as z

    d.load("digits", "train"), d.load("digits", "test")
    while not os.path.exists(barrier_file):          # start together
        _time.sleep(0.01)

    model = z.get_model("digits", "mlp", progress=False, **FAST)
    return hashlib.sha256(b"".join(v.numpy().tobytes()
                                   for v in model.state_dict().values())).hexdigest()


def test_concurrent_processes_train_a_model_once(tmp_path):
    import concurrent.futures as cf
    import multiprocessing as mp

    root, barrier = tmp_path / "cache", tmp_path / "go"
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
        futures = [pool.submit(_train_in_subprocess, str(root), str(barrier)) for _ in range(2)]
        barrier.touch()
        digests = {f.result(timeout=300) for f in futures}
    assert len(digests) == 1                                   # all got the same weights
    log = (root / "zoo" / "trainings.jsonl").read_text().splitlines()
    assert len(log) == 1 and json.loads(log[0])["method"] == "ce"
    assert not list((root / "zoo").glob("*.lock"))


def test_stale_lock_of_a_dead_process_is_taken_over(cache, fit_calls):
    import platform
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    cfg = zoo.config("digits", "mlp", **FAST)
    cache.mkdir(parents=True, exist_ok=True)
    lock = cache / f"{zoo._key(cfg)}.lock"
    lock.write_text(f"{platform.node()} {dead} 0\n")
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert len(fit_calls) == 1 and not lock.exists()


def test_lock_whose_pid_now_runs_a_later_process_is_taken_over(cache, fit_calls):
    """A lock left by a process whose pid has since been reused (machine restarted) is
    stale: its pid runs, but a process that started after the lock was written."""
    import platform

    if utils.process_start(os.getpid()) is None:
        pytest.skip("no /proc to read a process's start time from")
    cfg = zoo.config("digits", "mlp", **FAST)
    cache.mkdir(parents=True, exist_ok=True)
    lock = cache / f"{zoo._key(cfg)}.lock"
    lock.write_text(f"{platform.node()} {os.getpid()} {utils.process_start(os.getpid()) - 60}\n")
    assert zoo_lock._lock_owner_gone(lock)
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert len(fit_calls) == 1 and not lock.exists()


def test_lock_of_a_live_process_is_kept(cache):
    """A lock written by a process that still runs (this one, after it started) holds."""
    import platform

    cache.mkdir(parents=True, exist_ok=True)
    lock = cache / "held.lock"
    lock.write_text(f"{platform.node()} {os.getpid()} {time.time()}\n")
    assert not zoo_lock._lock_owner_gone(lock)
    start = utils.process_start(os.getpid())
    # the parse reads this test process's start: before now, and within the test run
    assert start is None or time.time() - 6 * 3600 < start <= time.time() + 2


def test_stats_and_training_log_count_hits_and_misses(cache):
    zoo.reset_stats()
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert zoo.stats() == {"hits": 1, "misses": 1}
    log = zoo.training_log()
    assert list(log["arch"]) == ["mlp"] and log["train_seconds"].iloc[0] > 0


def test_the_request_log_records_every_call_with_its_notebook(tmp_path, monkeypatch):
    from robattr.report import results

    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    log = tmp_path / "requests.jsonl"
    assert zoo.request_log(log) == []
    monkeypatch.setenv(zoo.REQUESTS_ENV, str(log))
    monkeypatch.setenv(results.NOTEBOOK_ENV, "ch/one")
    kw = dict(epochs=1, device="cpu", progress=False)
    zoo.get_model("digits", "mlp", **kw)
    zoo.get_model("digits", "mlp", **kw)                  # a cache hit is logged too
    calls = zoo.request_log(log)
    assert len(calls) == 2 and calls[0]["key"] == calls[1]["key"]
    assert calls[0]["config"] == zoo.config("digits", "mlp", epochs=1)
    assert calls[0]["notebook"] == "ch/one"
    monkeypatch.delenv(zoo.REQUESTS_ENV)
    zoo.get_model("digits", "mlp", **kw)
    assert len(zoo.request_log(log)) == 2                 # unset: nothing logged


def test_ig_norm_trains_at_000s_batch_unless_told_otherwise():
    ig = zoo.config("digits", "cnn", "ig_norm")
    assert ig["batch_size"] == 16 == zoo.default_batch_size("ig_norm")
    assert zoo.config_hash("digits", "cnn", "ig_norm") == zoo.config_hash(
        "digits", "cnn", "ig_norm", batch_size=16)          # one model, however it is asked for
    assert zoo.config("digits", "cnn", "ig_norm", batch_size=64)["batch_size"] == 64
    assert zoo.config("digits", "cnn", "ce")["batch_size"] == zoo.DEFAULTS["batch_size"] == 64
    with pytest.raises(ValueError):
        zoo.config("digits", "cnn", "ig_norm", batch_size=0)


# --------------------------------------------------------------------------- resuming
def test_an_interrupted_training_goes_on_from_its_checkpoint(tmp_path, monkeypatch,
                                                             interrupt_training):
    """A zoo training stopped after an epoch is listed as partly trained, goes on from its
    checkpoint when the model is asked for again, and stores the weights an uninterrupted
    training stores; its checkpoint is gone afterwards."""
    args = dict(epochs=3, batch_size=128, progress=False, device="cpu")
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "whole"))
    whole = zoo.get_model("digits", "cnn", "at", **args)

    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cut"))
    with pytest.raises(interrupt_training(1)):
        zoo.get_model("digits", "cnn", "at", **args)
    interrupt_training(None)
    (part,) = zoo.partly_trained()
    key = zoo.config_hash("digits", "cnn", "at", epochs=3, batch_size=128)
    assert (part["key"], part["epochs_done"], part["epochs"]) == (key, 1, 3)
    assert zoo.info("digits", "cnn", "at", epochs=3, batch_size=128) is None

    resumed = zoo.get_model("digits", "cnn", "at", **args)
    assert resumed.zoo_meta["resumed_after_epoch"] == 1
    assert whole.zoo_meta["resumed_after_epoch"] == 0
    for (k, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k
    assert resumed.zoo_meta["history"]["loss"] == whole.zoo_meta["history"]["loss"]
    assert zoo.partly_trained() == []
    assert not list(zoo.zoo_dir().glob("*.ckpt*"))


def test_short_trainings_write_no_checkpoint(cache):
    zoo.get_model("digits", "mlp", progress=False, **FAST)
    assert not list(cache.glob("*.ckpt*"))
