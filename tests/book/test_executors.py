"""Executors and sweeps: local processes and a real Ray cluster on loopback.

The sweep notebook trains (through the zoo) one tiny digits model that every run
shares, records two numbers, and fails on purpose for one parameter value.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from robattr.book import builder, cli, notebooks, profiles
from robattr.book.executors import (THREAD_VARS, Job, _limit_threads, make_job, run_jobs,
                                    worker_threads)
from robattr.book.params import Parameter, parse_rule
from robattr.book.stamps import STAMPS
from robattr.book.sweep import grid, parse_values, run_name, sweep


SWEEP_PARAMS = '''x = 1  # int | the swept value
fail_at = -1  # int | the run with x == fail_at raises
'''
SWEEP_BODY = '''import os
import torch
from robattr import zoo
from robattr.report import results
results.record("omp_threads", int(os.environ.get("OMP_NUM_THREADS", "0")))
torch.set_num_threads(1)
model = zoo.get_model("digits", "mlp", epochs=1, batch_size=256, progress=False, device="cpu")
results.record("square", x * x)
results.record("acc", model.zoo_meta["test_acc"], split="test")
results.record("zoo_misses", zoo.stats()["misses"])'''
SWEEP_FAIL = '''if x == fail_at:
    raise RuntimeError("planned failure")'''


@pytest.fixture
def project(make_notebook, make_project, tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj")
    make_notebook(root / "notebooks" / "ch" / "sweepme.ipynb", params=SWEEP_PARAMS,
                  cells=(SWEEP_BODY, SWEEP_FAIL))
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return root


def _check_sweep(report, root, tmp_path):
    out = report.output
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["x"]) == [1, 2, 3, 4]
    assert list(runs.sort_values("x")["status"]) == ["ok", "ok", "failed", "ok"]
    # the failure names the notebook, the run and the cell that raised
    (failure,) = report.failed
    assert "ch/sweepme [x=3]" in str(failure) and failure.cell == 4
    assert "planned failure" in failure.error
    for x in (1, 2, 3, 4):                      # executed notebooks kept, the failed one too
        assert (out / f"x={x}" / "sweepme.ipynb").is_file()
    tidy = pd.read_csv(report.results)
    squares = tidy[tidy["metric"] == "square"].set_index("x")["value"]
    assert squares.to_dict() == {1: 1.0, 2: 4.0, 4: 16.0}
    assert set(tidy.loc[tidy["metric"] == "acc", "split"]) == {"test"}
    assert report.figure is not None and report.figure.stat().st_size > 0
    # the shared zoo model was trained by exactly one run
    log = (tmp_path / "cache" / "zoo" / "trainings.jsonl").read_text().splitlines()
    assert len(log) == 1
    # (the trainer may be the failing run, whose records are not gathered)
    assert tidy.loc[tidy["metric"] == "zoo_misses", "value"].sum() <= 1


def test_parse_values_and_grid():
    p = Parameter("eps", 0.1, parse_rule("float >= 0"))
    assert parse_values("0.1, 0.2,1", p) == [0.1, 0.2, 1.0]
    lst = Parameter("eps", [0.1], parse_rule("list of float >= 0"))
    assert parse_values("[1,2],[4]", lst) == [[1, 2], [4]]
    with pytest.raises(ValueError):
        parse_values("0.1,abc", p)
    pts = grid({"a": [1, 2], "b": ["u", "v"]})
    assert pts == [{"a": 1, "b": "u"}, {"a": 1, "b": "v"}, {"a": 2, "b": "u"}, {"a": 2, "b": "v"}]
    assert run_name({"eps": 0.1, "arch": "a/b"}) == "eps=0.1,arch=a_b"


def test_sweep_rejects_unknown_parameters_before_running(project):
    with pytest.raises(ValueError, match="unknown parameter 'y'"):
        sweep("ch/sweepme", {"y": "1,2"}, log=lambda *a: None)
    assert not (project / "sweeps").exists()


@pytest.mark.slow
def test_local_sweep_in_two_processes(project, tmp_path, monkeypatch):
    for var in THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    report = sweep("ch/sweepme", {"x": "1,2,3,4"}, fixed={"fail_at": 3}, jobs=2,
                   log=lambda *a: None)
    _check_sweep(report, project, tmp_path)
    # each of the two workers' kernels got its share of the cores, not all of them
    tidy = pd.read_csv(report.results)
    assert set(tidy.loc[tidy["metric"] == "omp_threads", "value"]) == {worker_threads(2)}


def test_worker_threads_share_the_cores():
    assert [worker_threads(n, cpus=8) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    assert worker_threads(0, cpus=2) == 2 and worker_threads(4, cpus=1) == 1
    assert worker_threads(1) == (os.cpu_count() or 1)


def test_a_thread_cap_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    _limit_threads(1)
    assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ["MKL_NUM_THREADS"] == "1"


def test_cli_sweep_exit_code_and_summary(project, tmp_path, capsys):
    code = cli.main(["sweep", "ch/sweepme", "-p", "x", "1,3", "-s", "fail_at", "3",
                     "-o", str(tmp_path / "out"), "--no-figure"])
    assert code == 1
    err = capsys.readouterr().err
    assert "1 run(s) failed" in err and "x=3" in err and "cell 4" in err
    assert (tmp_path / "out" / "results.csv").is_file()
    assert cli.main(["sweep", "ch/sweepme", "-p", "x", "1", "--address", "h:1"]) == 2


def test_profile_resources_reach_the_job(tmp_path, project):
    prof = tmp_path / "p.yml"
    prof.write_text("resources:\n  default: {cpus: 2}\n  'ch/*': {gpus: 1}\n")
    loaded = profiles.load_profile(str(prof))
    nb = notebooks.discover(project)[0]
    job = make_job(nb, profiles.resolve(nb, loaded), loaded)
    assert (job.cpus, job.gpus) == (2.0, 1.0)
    assert job.env["ROBATTR_CACHE"] == str(tmp_path / "cache")
    prof.write_text("resources:\n  default: {gpu: 1}\n")
    with pytest.raises(ValueError, match="'cpus' and 'gpus'"):
        profiles.load_profile(str(prof))


def test_run_jobs_checks_its_arguments():
    with pytest.raises(ValueError, match="executor"):
        list(run_jobs([], executor="slurm"))
    with pytest.raises(ValueError, match="jobs"):
        list(run_jobs([], jobs_at_once=-1))


# ------------------------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


@pytest.mark.slow
def test_ray_sweep_on_a_three_node_cluster(project, tmp_path, ray_cluster):
    report = sweep("ch/sweepme", {"x": "1,2,3,4"}, fixed={"fail_at": 3}, executor="ray",
                   jobs=0, address=ray_cluster.address, log=lambda *a: None)
    _check_sweep(report, project, tmp_path)


@pytest.mark.slow
def test_ray_refuses_jobs_the_cluster_cannot_hold(project, ray_cluster):
    nb = notebooks.discover(project)[0]
    job = Job("big", nb.key, nb.path.read_bytes(), {"x": 1, "fail_at": -1}, "o.ipynb", gpus=1)
    with pytest.raises(RuntimeError, match="needs 1 GPU"):
        list(run_jobs([job], executor="ray", address=ray_cluster.address))


@pytest.mark.slow
def test_build_on_ray_writes_pages_and_stamps(project, ray_cluster):
    report = builder.build(project, executor="ray", address=ray_cluster.address, jobs=0,
                            html=False, progress=False, log=lambda *a: None)
    assert report.executed == ["ch/sweepme"] and not report.failed
    assert (project / "book" / "ch" / "sweepme.ipynb").is_file()
    assert (project / "book" / "ch" / "sweepme.results.csv").is_file()
    stamps = json.loads((project / "book" / STAMPS).read_text())
    assert "ch/sweepme" in stamps


def test_executed_notebooks_get_no_progress_bars(monkeypatch):
    """The kernel of a built notebook inherits TQDM_DISABLE: bars stay out of the pages."""
    import os

    from robattr.book import execution

    assert execution.QUIET_ENV["TQDM_DISABLE"] == "1"
    seen = {}

    def fake_execute_notebook(src, out, **kw):
        seen.update({k: os.environ.get(k) for k in execution.QUIET_ENV})
        raise RuntimeError("stop here")

    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute_notebook)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv("PYTHONWARNINGS", "ignore::DeprecationWarning")
    import tempfile
    from pathlib import Path

    from robattr.book.notebooks import discover

    root = Path(__file__).resolve().parents[2]
    nb = next(n for n in discover(root) if n.key == "example/digits_saliency")
    with tempfile.TemporaryDirectory() as tmp:
        failure = execution.execute(nb, {}, Path(tmp) / "out.ipynb", progress=False)
    assert failure is not None and "stop here" in failure.error
    assert seen == {"TQDM_DISABLE": "1",
                    "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore:IProgress not found"}
    assert "TQDM_DISABLE" not in os.environ
    assert os.environ["PYTHONWARNINGS"] == "ignore::DeprecationWarning"


def test_a_run_shows_its_cells_and_its_trainings_and_no_kernel_log(monkeypatch, tmp_path):
    """With progress, execute names the section of each code cell (k of N) and hands the
    kernel a file for its trainings' bars (ROBATTR_PROGRESS), which the bar shows; every
    kernel starts with its own log kept to errors."""
    import os
    import time

    import nbformat
    import papermill

    from robattr import context
    from robattr.book import execution
    from robattr.book.notebooks import discover

    seen = {}

    def fake_execute_notebook(src, out, **kw):
        seen["args"] = kw["extra_arguments"]
        seen["progress_file"] = os.environ.get(context.PROGRESS_ENV)
        start = kw["on_cell_start"]
        start(cell=nbformat.v4.new_markdown_cell("# Title\n## The model"), cell_index=0)
        start(cell=nbformat.v4.new_code_cell("x = 1"), cell_index=1)
        with open(seen["progress_file"], "a") as f:        # what a training bar writes
            f.write("\rce 1/3:  50%|#####     | 5/10")
        time.sleep(1.5)
        seen["postfix"] = seen["bar"].bar.postfix
        raise RuntimeError("stop here")

    real = execution.CellProgress

    class Spy(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            seen["bar"] = self

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute_notebook)
    monkeypatch.setattr(execution, "CellProgress", Spy)
    root = Path(__file__).resolve().parents[2]
    nb = next(n for n in discover(root) if n.key == "example/digits_saliency")
    failure = execution.execute(nb, {}, tmp_path / "out.ipynb", progress=True)
    assert failure is not None and "stop here" in failure.error
    assert seen["args"] == ["--IPKernelApp.log_level=ERROR"]
    assert seen["bar"].heading == "The model" and seen["bar"].bar.n == 1
    assert seen["postfix"] == "training ce 1/3:  50%|#####     | 5/10"
    assert not Path(seen["progress_file"]).exists()              # removed at the end
    assert context.PROGRESS_ENV not in os.environ


def test_zoo_trainings_in_a_build_kernel_keep_their_bars_off_the_page(monkeypatch, tmp_path):
    from robattr import context, zoo

    for name in (context.PROGRESS_ENV, context.RESULTS_ENV, context.NOTEBOOK_ENV):
        monkeypatch.delenv(name, raising=False)
    assert zoo._progress(True) == {"progress": True}              # a user's own session
    monkeypatch.setenv(context.RESULTS_ENV, str(tmp_path / "r.csv"))
    assert zoo._progress(True) == {"progress": False}             # a build's kernel
    monkeypatch.setenv(context.PROGRESS_ENV, str(tmp_path / "bars.txt"))
    got = zoo._progress(False)                                    # robattr run: to its file
    assert got["progress"] is True and got["progress_file"].name == str(tmp_path / "bars.txt")
    got["progress_file"].close()


def test_an_executed_notebook_opens_with_what_it_finds(tmp_path, monkeypatch):
    """After its title, an executed notebook gets a box with each statement and claim it
    recorded (not its checks or questions), the verdict's mark and word, and a link to the
    line; a notebook that recorded none gets no box."""
    import nbformat

    from robattr.report import papers, results, verdicts
    from types import SimpleNamespace

    from robattr.book import execution

    csv = tmp_path / "nb.results.csv"
    monkeypatch.setenv(results.ENV, str(csv))
    assert execution.findings_markdown("wang2020/x", csv) is None
    papers.check("our identity", verdicts.exact(0, 3))
    assert execution.findings_markdown("wang2020/x", csv) is None
    papers.claim("a claim of 000", verdicts.Verdict("holds", "r"), place="Table 2")
    papers.statement("Thm 1 as printed", verdicts.exact(2, 9), place="Thm 1")
    box = execution.findings_markdown("wang2020/x", csv)
    assert box.count("\n| ") == 3 and "our identity" not in box
    anchor = results.read(csv).query("text == 'a claim of 000'")["anchor"].iloc[0]
    assert f'✓ holds</span> | <a href="#{anchor}">go</a> |' in box
    assert "✗ does not hold as printed" in box and "wang2020" in box       # 000 read as its key
    out = tmp_path / "nb.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, out)
    execution._add_findings_cell(SimpleNamespace(key="wang2020/x"), out, csv)
    cells = nbformat.read(out, as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "markdown", "code"]
    assert cells[1].metadata["tags"] == [execution.FINDINGS_TAG]


def test_the_answer_to_a_predict_prompt_starts_folded(tmp_path):
    import nbformat

    from robattr.book import execution

    out = tmp_path / "nb.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"),
                nbformat.v4.new_markdown_cell("```{admonition} Predict before you run\n:class: tip\n"
                                              "Which map keeps the most?\n```"),
                nbformat.v4.new_code_cell("answer = 1"), nbformat.v4.new_code_cell("other = 2")]
    nb.cells[2].metadata["tags"] = ["hide-input"]
    nbformat.write(nb, out)
    execution._hide_predicted_answers(out)
    cells = nbformat.read(out, as_version=4).cells
    assert cells[2].metadata["tags"] == ["hide-input", "hide-output"]
    assert "tags" not in cells[3].metadata
    execution._hide_predicted_answers(out)                   # once only
    assert nbformat.read(out, as_version=4).cells[2].metadata["tags"].count("hide-output") == 1


def test_machinery_is_folded_and_the_idea_stays_open(tmp_path):
    import nbformat

    from robattr.book import execution

    out = tmp_path / "nb.ipynb"
    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_code_cell(s) for s in ("x = 1", "y = 2", "z = 3", "w = 4")]
    cells[0].metadata["tags"] = ["parameters"]
    cells[1].metadata["tags"] = [execution.IDEA_TAG]
    cells[2].metadata["tags"] = ["hide-cell"]
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), *cells]
    nbformat.write(nb, out)
    execution._fold_machinery(out)
    got = [c.metadata.get("tags") for c in nbformat.read(out, as_version=4).cells[1:]]
    assert got == [["parameters"], ["idea"], ["hide-cell"], ["hide-input"]]


def test_a_kernel_that_dies_while_starting_is_started_again(monkeypatch, tmp_path):
    """'Kernel died before replying to kernel_info' (no cell ran: a port taken by a kernel
    starting beside it) starts the notebook again, up to KERNEL_START_ATTEMPTS in all; any
    other failure, and a kernel that keeps dying, is reported as before."""
    import papermill

    from robattr.book import execution
    from robattr.book.notebooks import discover

    calls = []

    def dies(times):
        def fake_execute_notebook(src, out, **kw):
            calls.append(out)
            if len(calls) <= times:
                raise RuntimeError("Kernel died before replying to kernel_info")
            raise ValueError("reached the notebook")       # past the start: not retried
        return fake_execute_notebook

    monkeypatch.setattr(execution.time, "sleep", lambda s: None)
    root = Path(__file__).resolve().parents[2]
    nb = next(n for n in discover(root) if n.key == "example/digits_saliency")
    monkeypatch.setattr(papermill, "execute_notebook", dies(2))
    failure = execution.execute(nb, {}, tmp_path / "out.ipynb", progress=False)
    assert len(calls) == 3 and "reached the notebook" in failure.error
    calls.clear()
    monkeypatch.setattr(papermill, "execute_notebook", dies(execution.KERNEL_START_ATTEMPTS))
    failure = execution.execute(nb, {}, tmp_path / "out.ipynb", progress=False)
    assert len(calls) == execution.KERNEL_START_ATTEMPTS
    assert failure.cell is None and "before replying to kernel_info" in failure.error
    calls.clear()
    monkeypatch.setattr(papermill, "execute_notebook", dies(0))
    assert "reached the notebook" in execution.execute(nb, {}, tmp_path / "o.ipynb",
                                                       progress=False).error
    assert len(calls) == 1
