"""The package's layout: two halves, no import circle.

robattr's science core (``robattr.data``, ``models``, ``attributions``, ...) and the book
machinery (``robattr.book``: notebooks, parameters, profiles, stamps, execution, HTML,
sweeps, the ``robattr`` command). The import graph of robattr's modules, read with
``ast`` from the source (absolute and relative imports, at any depth of the code, inside
functions too), has no cycle, and no core module imports ``robattr.book``. The book's
former top-level names (``robattr.pipeline``, ``robattr.params``, ...) are gone.
"""
from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest

import robattr

ROOT = Path(__file__).resolve().parents[2]
BOOK = "robattr.book"


# ------------------------------------------------------------------ the import graph
def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package at ``package_dir``, by dotted name (a package by the
    name of its ``__init__.py``)."""
    if not (package_dir / "__init__.py").is_file():
        raise ValueError(f"{package_dir} is not a package (no __init__.py)")
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _target(name: str, known: set[str], aliases: dict[str, str]) -> str | None:
    """The module that importing ``name`` loads: ``name`` itself, the module an alias
    names, or the longest known prefix (``robattr.bounds.foo`` where ``foo`` is a
    function is ``robattr.bounds``); None outside the package."""
    while name:
        if name in aliases:
            return aliases[name]
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, known: set[str],
               aliases: dict[str, str] | None = None) -> set[str]:
    """The modules of ``known`` that module ``name`` (source file ``path``) imports,
    anywhere in its code: ``import a.b``, ``from a import b``, ``from .b import c``,
    ``from .. import d``. ``aliases`` maps names that resolve to another module
    (``robattr.pipeline`` → ``robattr.book``). The parent packages Python runs before a
    module are not counted (:func:`test_the_package_roots_import_nothing` checks that
    robattr's do not import anything)."""
    aliases = aliases or {}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    raise ValueError(f"{path}: relative import beyond the top-level package")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # `from a import b` loads a.b when b is a module, else a (by _target's prefix)
            candidates = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for cand in candidates:
            target = _target(cand, known, aliases)
            if target is not None and target != name:
                found.add(target)
    return found


def import_graph(package_dir: Path, aliases: dict[str, str] | None = None) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over every module of the package."""
    mods = module_names(package_dir)
    return {name: imports_of(name, path, set(mods), aliases) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import circle per strongly connected group of modules (Tarjan), each as the
    path ``[a, b, ..., a]``; empty when the graph is a DAG."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A concrete circle through the first module of a strongly connected group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:                                  # breadth first, inside the group
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    return paths[v] + [start]
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle through {start} in {group}")


def robattr_graph() -> dict[str, set[str]]:
    return import_graph(ROOT / "robattr")


# ------------------------------------------------------------------ the scanner itself
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path / "pkg"


def test_the_scanner_reads_every_kind_of_import_and_finds_a_circle(tmp_path):
    pkg = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import os\nfrom pkg.sub import b\n",
        "pkg/sub/__init__.py": "from . import c\n",
        "pkg/sub/b.py": "def f():\n    from ..a import x\n",        # relative, in a function
        "pkg/sub/c.py": "import pkg.old\n",                            # through an alias
        "pkg/d.py": "from pkg.a import helper\n",                     # a name, not a module
    })
    graph = import_graph(pkg, aliases={"pkg.old": "pkg.d"})
    assert graph == {"pkg": set(), "pkg.a": {"pkg.sub.b"}, "pkg.sub": {"pkg.sub.c"},
                     "pkg.sub.b": {"pkg.a"}, "pkg.sub.c": {"pkg.d"}, "pkg.d": {"pkg.a"}}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]
    del graph["pkg.sub.b"]
    assert cycles(graph) == []


def test_the_scanner_refuses_what_is_not_a_package(tmp_path):
    with pytest.raises(ValueError, match="not a package"):
        module_names(tmp_path)
    pkg = _package(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from ... import x\n"})
    with pytest.raises(ValueError, match="beyond the top-level package"):
        import_graph(pkg)


def test_the_scanner_sees_robattrs_known_imports():
    graph = robattr_graph()
    assert "robattr.book.stamps" in graph["robattr.book.builder"]
    assert "robattr.report.results" in graph["robattr.book.execution"]
    assert "robattr.report.results" in graph["robattr.report.papers"]          # inside claim()
    assert "robattr.attributions" in graph["robattr.attack_protocol"]   # inside functions


# ------------------------------------------------------------------ the rules
def test_robattr_has_no_import_circle():
    found = cycles(robattr_graph())
    assert not found, "import circles in robattr:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_package_roots_import_nothing():
    """``robattr`` and ``robattr.book`` load their modules on first use (by name, through
    importlib), so importing any module never drags a circle in through its parents."""
    graph = robattr_graph()
    assert graph["robattr"] == set() and graph[BOOK] == set()


def test_the_science_core_never_imports_the_book():
    graph = robattr_graph()
    core = [m for m in graph if m != BOOK and not m.startswith(f"{BOOK}.")]
    assert {"robattr.data", "robattr.zoo", "robattr.report.papers",
            "robattr.report.results"} <= set(core)
    bad = {m: sorted(t for t in graph[m] if t == BOOK or t.startswith(f"{BOOK}."))
           for m in core}
    bad = {m: t for m, t in bad.items() if t}
    assert not bad, f"science modules that import the book machinery: {bad}"


def test_the_book_machinery_lives_in_robattr_book():
    for old in ("pipeline", "executors", "sweep", "params", "verdicts_page", "cli"):
        assert not (ROOT / "robattr" / f"{old}.py").exists(), f"robattr/{old}.py is back"
    assert not (ROOT / "robattr" / "profiles").exists()
    assert sorted((ROOT / "robattr" / "book" / "profiles").glob("*.yml"))


# ------------------------------------------------------------------ no old names
@pytest.mark.parametrize("old", ["pipeline", "params", "executors", "sweep", "verdicts_page",
                                 "cli", "evaluate", "lim2021", "wang2020", "wangkong2025",
                                 "check_params"])
def test_former_top_level_names_are_gone(old):
    """Issue 40: no compatibility alias keeps a name no notebook needs; the modules are
    imported from where they live (robattr.book.*, robattr.chapters.*)."""
    with pytest.raises(AttributeError):
        getattr(robattr, old)
    assert old not in robattr.__all__


def test_the_book_package_defines_no_names_of_its_own():
    import robattr.book

    with pytest.raises(AttributeError):
        robattr.book.build
    assert robattr.start is importlib.import_module("robattr.book.session").start


def test_the_console_script_and_the_profiles_ship_with_the_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    module, _, func = config["project"]["scripts"]["robattr"].partition(":")
    assert callable(getattr(importlib.import_module(module), func))
    for pattern in config["tool"]["setuptools"]["package-data"]["robattr"]:
        assert sorted((ROOT / "robattr").glob(pattern)), f"package-data {pattern!r} matches nothing"


# --------------------------------------------------------------------------- the three halves
def _imports(path: Path) -> set[str]:
    """The robattr modules a file imports (absolute imports, and string arguments of
    importlib.import_module)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" \
                and node.args and isinstance(node.args[0], ast.Constant):
            out.add(str(node.args[0].value))
    return {m for m in out if m == "robattr" or m.startswith("robattr.")}


def test_imports_run_one_way_between_library_chapters_and_book():
    """The library knows nothing of the chapters; the chapters import the library (never
    the book); the book reads the chapters' declarations through robattr.chapters' own API
    only (robattr.chapters.declaration / declarations), never a chapter's internals."""
    pkg = ROOT / "robattr"
    wrong = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        mods = _imports(path)
        into_chapters = {m for m in mods if m.startswith("robattr.chapters")}
        if rel.startswith("robattr/chapters/"):
            wrong += [f"{rel} imports {m}" for m in mods if m.startswith("robattr.book")]
        elif rel.startswith("robattr/book/"):
            wrong += [f"{rel} imports {m}" for m in into_chapters
                      if m not in {"robattr.chapters", "robattr.chapters.declaration",
                                   "robattr.chapters.declarations"}]
        else:
            wrong += [f"{rel} imports {m}" for m in into_chapters]
    assert wrong == [], "\n".join(wrong)


def test_the_import_scan_sees_each_kind_of_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import robattr.book.plan\nfrom robattr.chapters.wang2020 import setup\n"
                 "import importlib\nimportlib.import_module('robattr.chapters.lim2021')\n"
                 "import numpy\n")
    assert _imports(f) == {"robattr.book.plan", "robattr.chapters.wang2020",
                           "robattr.chapters.wang2020.setup", "robattr.chapters.lim2021"}


def test_no_module_is_over_600_lines_unless_it_says_why():
    """A module over 600 lines must say why in its docstring ("longer than 600 lines
    because ...")."""
    long = []
    for path in sorted((ROOT / "robattr").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 600:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "longer than 600 lines because" not in doc:
                long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert long == [], "\n".join(long)


# ------------------------------------------------------------------ one run context
def _robattr_variable_literals(path: Path) -> list[tuple[int, str]]:
    import re

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.fullmatch(r"ROBATTR_[A-Z_]+", n.value)]


def test_only_the_run_context_names_the_robattr_variables():
    """Every ROBATTR_* variable is named (and so read) in robattr.context alone; the other
    modules take its RunContext or its *_ENV constants."""
    from robattr import context

    pkg = Path(robattr.__file__).parent
    found = {f"{p.relative_to(pkg)}:{line}": name for p in sorted(pkg.rglob("*.py"))
             if p != pkg / "context.py" for line, name in _robattr_variable_literals(p)}
    assert found == {}
    named = {name for _, name in _robattr_variable_literals(pkg / "context.py")}
    assert named == set(context.VARIABLES.values())


def test_the_run_context_reads_the_environment_at_each_call(monkeypatch, tmp_path):
    from robattr import context

    monkeypatch.setenv(context.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(context.NOTEBOOK_ENV, "wang2020/table2_attacks")
    monkeypatch.delenv(context.ZOO_LOCK_STALE_ENV, raising=False)
    ctx = context.current()
    assert (ctx.cache, ctx.chapter) == (str(tmp_path), "wang2020")
    assert ctx.zoo_lock_stale == context.DEFAULT_LOCK_STALE_SECONDS
    with pytest.raises(Exception):
        ctx.cache = "elsewhere"                       # frozen
    monkeypatch.setenv(context.ZOO_LOCK_STALE_ENV, "60")
    assert context.current().zoo_lock_stale == 60.0
    monkeypatch.setenv(context.ZOO_LOCK_STALE_ENV, "soon")
    with pytest.raises(ValueError, match="ROBATTR_ZOO_LOCK_STALE"):
        context.current()
    assert context.exported([context.CACHE_ENV]) == {context.CACHE_ENV: str(tmp_path)}


def test_no_module_imports_the_package_root_for_its_version():
    """``from robattr import __version__`` would load the package root from inside it:
    the version lives in robattr.version."""
    pkg = Path(robattr.__file__).parent
    found = []
    for path in sorted(pkg.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "robattr" and \
                    any(a.name == "__version__" for a in node.names):
                found.append(f"{path.relative_to(pkg)}:{node.lineno}")
    assert found == []


# --------------------------------------------------------------------------- rooms
REPORT = ("papers", "verdicts", "reader", "references", "results", "tables", "viz")
#: the library's computing core: what a result is computed with, never how it is reported
COMPUTING = ("robattr.data", "robattr.models", "robattr.attributions", "robattr.attacks",
             "robattr.bounds", "robattr.metrics", "robattr.train", "robattr.zoo", "robattr.utils",
             "robattr.catalog", "robattr.memory", "robattr.precision", "robattr.cost")


def test_what_a_page_shows_and_records_lives_in_robattr_report():
    """Issue 40: one room, named, for papers, verdicts, reader, references, results, tables and
    viz; none of them is left at the package's ground floor."""
    for name in REPORT:
        assert not (ROOT / "robattr" / f"{name}.py").exists() and \
            not (ROOT / "robattr" / name).exists(), f"robattr/{name} is back at the ground floor"
        assert (ROOT / "robattr" / "report" / f"{name}.py").exists() or \
            (ROOT / "robattr" / "report" / name / "__init__.py").exists(), name
    assert robattr_graph()["robattr.report"] == set()       # the room's door imports nothing


def test_the_computing_core_never_imports_the_report():
    graph = robattr_graph()
    bad = {m: sorted(t for t in targets if t.startswith("robattr.report"))
           for m, targets in graph.items() if m.startswith(COMPUTING)}
    assert not {m: t for m, t in bad.items() if t}, bad


def test_chapter_progress_bars_leave_tqdm_disable_alone():
    """A bar built with an explicit ``disable=`` ignores ``TQDM_DISABLE``, which keeps the
    book's pages free of progress bars (the browser check found one on a page)."""
    chapters = sorted((ROOT / "robattr" / "chapters").rglob("*.py"))
    found = [f"{p.relative_to(ROOT)}:{i}" for p in chapters
             for i, line in enumerate(p.read_text().splitlines(), start=1)
             if "tqdm(" in line and "disable=" in line]
    assert not found, found


# ------------------------------------------------------------------ the tests' rooms
TEST_ROOMS = {"library", "report", "chapters", "book"}
TEST_MODULES = ("test_", "conftest", "tests.", "tests")


def test_the_tests_mirror_the_package():
    """Issue 40: every test module sits in the room of what it tests (``library/``,
    ``report/``, ``chapters/<key>/`` with ``chapters/`` itself for tests of two chapters,
    ``book/``), each chapter folder names a chapter package, and no test file is left at
    the top of ``tests/``."""
    tests = ROOT / "tests"
    stray = [p.name for p in tests.glob("*.py") if p.name != "conftest.py"]
    assert not stray, f"test modules outside a room: {stray}"
    rooms = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert rooms == TEST_ROOMS, rooms
    keys = {p.name for p in (ROOT / "robattr" / "chapters").iterdir()
            if (p / "__init__.py").is_file()}
    folders = {p.name for p in (tests / "chapters").iterdir() if p.is_dir()
               and not p.name.startswith((".", "_"))}
    assert folders <= keys, f"chapter test folders without a chapter: {sorted(folders - keys)}"
    assert keys <= folders, f"chapters without tests: {sorted(keys - folders)}"
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), "two test modules share a file name (pytest's " \
        "default import mode needs them distinct)"


def test_tests_share_fixtures_through_conftest_only():
    """No test module imports another (a helper two modules need is a fixture of the
    nearest ``conftest.py``)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(TEST_MODULES):
                found.append(f"{path.relative_to(ROOT)}: from {node.module}")
            if isinstance(node, ast.Import):
                found += [f"{path.relative_to(ROOT)}: import {a.name}" for a in node.names
                          if a.name.startswith(TEST_MODULES)]
    assert not found, found
