"""robattr.zoo.transfer: models and trainings in progress carried from one zoo to another."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from robattr import train, zoo
from robattr.zoo import transfer

MLP = dict(epochs=2, batch_size=128, progress=False, device="cpu")
LONG = dict(epochs=3, batch_size=128, progress=False, device="cpu")


def _use(monkeypatch, tmp_path, name):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / name))
    return zoo.zoo_dir()


def _partly_trained_at(interrupt_training, epoch):
    with pytest.raises(interrupt_training(epoch)):
        zoo.get_model("digits", "mlp", "ce", **LONG)
    interrupt_training(None)


def _no_fit(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the zoo trained a model it should have loaded")

    monkeypatch.setattr(train, "fit", refuse)


@pytest.fixture
def exported(tmp_path, monkeypatch, interrupt_training):
    """A zoo with one trained MLP and one 3-epoch MLP training stopped after its first epoch,
    exported (with a key the zoo never saw) to ``tmp_path / 'kept'``."""
    _use(monkeypatch, tmp_path, "first")
    mlp = zoo.get_model("digits", "mlp", **MLP)
    _partly_trained_at(interrupt_training, 1)
    keys = [mlp.zoo_meta["key"], zoo.config_hash("digits", "mlp", "ce", epochs=3, batch_size=128),
            zoo.config_hash("digits", "cnn", "ce", epochs=9)]
    done = transfer.export_keys(keys, tmp_path / "kept")
    return keys, done, mlp


def test_export_copies_models_and_checkpoints_and_names_the_missing(exported, tmp_path):
    (mlp_key, long_key, absent), done, _ = exported
    assert done.models == [mlp_key]
    assert done.checkpoints == {long_key: 1}
    assert done.missing == [absent] and not done.refused
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == sorted([
        f"{mlp_key}.safetensors", f"{mlp_key}.json", f"{long_key}.ckpt", f"{long_key}.ckpt.json"])
    assert "1 trained model(s), 1 training(s) in progress, 1 with nothing to copy" == done.summary()


def test_import_serves_the_model_and_resumes_the_training(exported, tmp_path, monkeypatch):
    """After an import, the trained model loads without training, and the training in
    progress goes on from its checkpoint to the weights an uninterrupted training ends with."""
    (mlp_key, long_key, _), _, mlp = exported
    _use(monkeypatch, tmp_path, "second")
    done = transfer.import_folder(tmp_path / "kept")
    assert (done.models, done.checkpoints, done.refused) == ([mlp_key], {long_key: 1}, {})
    assert [p["key"] for p in zoo.partly_trained()] == [long_key]

    real_fit = train.fit
    _no_fit(monkeypatch)
    loaded = zoo.get_model("digits", "mlp", **MLP)
    for k, v in mlp.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    monkeypatch.setattr(train, "fit", real_fit)

    resumed = zoo.get_model("digits", "mlp", "ce", **LONG)
    assert resumed.zoo_meta["resumed_after_epoch"] == 1
    _use(monkeypatch, tmp_path, "whole")
    whole = zoo.get_model("digits", "mlp", "ce", **LONG)
    for k, v in whole.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k

    again = transfer.import_folder(tmp_path / "kept")
    assert (again.models, again.checkpoints) == ([mlp_key], {})
    assert again.kept == [long_key]   # the trained model beats its old checkpoint


def test_import_refuses_files_that_fail_their_checks(exported, tmp_path, monkeypatch):
    (mlp_key, long_key, absent), _, _ = exported
    kept = tmp_path / "kept"
    weights = kept / f"{mlp_key}.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    shutil.copy(kept / f"{long_key}.ckpt", kept / f"{absent}.ckpt")   # another run's state
    here = _use(monkeypatch, tmp_path, "second")
    done = transfer.import_folder(kept)
    assert done.models == [] and done.checkpoints == {long_key: 1}
    assert "sha256" in done.refused[f"{mlp_key}.json"]
    assert "not a checkpoint" in done.refused[f"{absent}.ckpt"]
    assert not (here / f"{mlp_key}.safetensors").exists()
    assert not (here / f"{absent}.ckpt").exists()

    meta = json.loads((kept / f"{mlp_key}.json").read_text())
    meta["config"]["epochs"] = 3                                    # relabelled weights
    (kept / f"{mlp_key}.json").write_text(json.dumps(meta))
    assert "does not hash" in transfer.import_folder(kept).refused[f"{mlp_key}.json"]


def test_import_never_moves_a_training_back(exported, tmp_path, monkeypatch,
                                            interrupt_training):
    (_, long_key, _), _, _ = exported
    _use(monkeypatch, tmp_path, "second")
    _partly_trained_at(interrupt_training, 2)
    done = transfer.import_folder(tmp_path / "kept")
    assert done.kept == [long_key] and done.checkpoints == {}
    assert [p["epochs_done"] for p in zoo.partly_trained()] == [2]


def test_import_of_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        transfer.import_folder(tmp_path / "nowhere")


def test_cli_exports_a_profiles_models(tmp_path, monkeypatch, capsys):
    """`robattr zoo export` lists what the profile's notebooks ask for; on an empty zoo
    every model has nothing to copy, and the folder is made; `zoo import` of it is a no-op."""
    from robattr.book import cli
    from robattr.book.pretrain import requested

    _use(monkeypatch, tmp_path, "empty")
    n = len(requested(None, "smoke", "example/digits_saliency"))
    assert n >= 1
    out = tmp_path / "out"
    assert cli.main(["zoo", "export", str(out), "--profile", "smoke",
                     "--only", "example/digits_saliency"]) == 0
    assert f"0 trained model(s), 0 training(s) in progress, {n} with nothing to copy" \
        in capsys.readouterr().out
    assert out.is_dir() and not list(out.iterdir())
    assert cli.main(["zoo", "import", str(out)]) == 0
    assert cli.main(["zoo", "import", str(tmp_path / "nowhere")]) == 2
