"""Fixtures of the book room: a tiny project in a temporary folder (a ``_toc.yml``, a
``_config.yml`` and parameterized notebooks), for the pipeline, executor and reference tests."""
from __future__ import annotations

import nbformat
import pytest

PARAMS = '''n = 3  # int >= 0 | how many squares to print
name = "demo"  # str | a label
eps = [0.1, 0.2]  # list of float >= 0 | noise sizes
epochs = 2  # int >= 1 | a count
fail_at = -1  # int | cell raises when n equals this
'''

BODY = '''import robattr
run = robattr.start()
squares = [i * i for i in range(n)]
print(name, squares)'''

FAIL = '''if n == fail_at:
    raise RuntimeError("asked to fail")'''


def _make_notebook(path, params=PARAMS, cells=(BODY, FAIL), then=()):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A test notebook"),
                nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
                *[nbformat.v4.new_code_cell(c) for c in (*cells, *then)]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _make_project(root, monkeypatch):
    """A minimal project (_toc.yml, _config.yml, book/), made the working directory."""
    (root / "book").mkdir(parents=True)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    (root / "_config.yml").write_text("title: t\n")
    monkeypatch.delenv("ROBATTR_ROOT", raising=False)
    monkeypatch.chdir(root)
    return root


def _profile(tmp_path, text):
    path = tmp_path / "prof.yml"
    path.write_text(text)
    return str(path)


def _quiet(*args, **kwargs):
    pass


@pytest.fixture
def make_notebook():
    """``make_notebook(path, params=PARAMS, cells=(BODY, FAIL), then=())`` writes a test
    notebook: a title, the parameters cell, ``cells`` and then ``then``."""
    return _make_notebook


@pytest.fixture
def make_project(monkeypatch):
    """``make_project(root)``: a minimal project at ``root``, made the working directory."""
    return lambda root: _make_project(root, monkeypatch)


@pytest.fixture
def profile(tmp_path):
    """``profile(text)``: a profile file with that text (rewritten on each call)."""
    return lambda text: _profile(tmp_path, text)


@pytest.fixture
def quiet():
    """A ``log`` that prints nothing."""
    return _quiet


@pytest.fixture
def book(tmp_path, make_project):
    """A minimal project with two notebooks."""
    root = make_project(tmp_path / "proj")
    _make_notebook(root / "notebooks" / "ch" / "one.ipynb")
    _make_notebook(root / "notebooks" / "ch" / "two.ipynb")
    return root
