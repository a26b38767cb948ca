"""Smoke tests of benchmarks/training.py (its tables, not its timings: speed is measured by
the benchmark, never asserted)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def training():
    spec = importlib.util.spec_from_file_location("bench_training",
                                                  ROOT / "benchmarks" / "training.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paper_ratios_come_from_the_tables(training):
    from robattr.report import papers

    ratios = training.paper_ratios()
    table = papers.table("wang2020_table3")
    hours = {r.training: r.value for r in table[table["metric"] == "time_per_epoch_h"].itertuples()}
    assert set(hours) == set(training.PAPER_WANG2020.values()) == {"Madry", "SSR", "IG-NORM"}
    assert ratios["000"]["SSR"] == pytest.approx(0.18 / 0.24)
    assert ratios["000"]["IG-NORM"] == pytest.approx(0.44 / 0.24)
    assert ratios["003"][("LeNet", "l2+Cosd", "time")] == 2.75
    assert ratios["003"][("ResNet18", "Hessian", "time")] == 8.95


@pytest.mark.parametrize("arch", ["lenet", "resnet20", "resnet18_cifar"])
def test_cifar_archs_draw_only_the_timed_batches(training, arch):
    info, batches, per_epoch, _ = training._batches(arch, 50_000, 128, 4, seed=0)
    assert len(batches) == 4 and per_epoch == 391
    assert batches[0][0].shape == (128, 3, 32, 32) and batches[0][1].max() < 10
    assert info["num_classes"] == 10


def test_table_has_ratios_to_ce_and_at(training, capsys):
    training.main(["--archs", "cnn", "--losses", "ssr", "--steps", "1", "--threads", "1",
                   "--device", "cpu"])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in ("ce", "at", "ssr")}
    assert set(rows) == {"ce", "at", "ssr"}       # ce and at are added as the baselines
    # columns: loss, img/s, s/epoch, xCE, 003 xCE, xAT, 000 xAT
    assert float(rows["ce"][1]) > 0 and rows["ce"][3] == "x1.00" and rows["at"][5] == "x1.00"
    assert rows["ssr"][6] == "x0.75"              # 000 Table 3: 0.18 h / 0.24 h


def test_the_trainer_loop_is_compared_with_bare_steps(training, capsys):
    training.main(["--archs", "lenet", "--losses", "ce", "--steps", "1", "--threads", "1",
                   "--device", "cpu", "--batch-size", "8", "--pipeline-batches", "2"])
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("lenet, the trainer's own loop"))
    assert "img/s; bare CE steps on ready batches:" in line and "% of the loop" in line
    with pytest.raises(SystemExit):
        training.main(["--pipeline-batches", "-1"])


def test_bad_arguments_are_refused(training):
    with pytest.raises(SystemExit):
        training.main(["--archs", "vgg"])
    with pytest.raises(SystemExit):
        training.main(["--steps", "0"])
