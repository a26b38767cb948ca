"""The notebooks read like a paper: setup collapsed, short cells, no helper copied between
notebooks (issue 19). Source-level checks; the HTML side is in tests/book/test_book.py."""
from __future__ import annotations

import ast
import json
from collections import defaultdict
from pathlib import Path

import pytest

from robattr.book.execution import IDEA_TAG

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))

#: the most lines of logic (non-blank, non-comment) a code cell may hold (issue 40), the
#: parameters cell excepted (it declares, it does not compute): a longer step is split, or
#: its logic moves into the chapter's module
MAX_CELL_LINES = 15
#: the most the median code cell of the book may hold (issue 40: cells of a few lines)
MAX_MEDIAN_LINES = 8
#: the longest code line (characters), the parameters cell excepted (its help texts)
MAX_LINE_CHARS = 100
#: lines a block must have before two notebooks may not share it (issue 40)
SHARED_BLOCK = 6
#: the most code cells a notebook tags ``idea`` (issue 41 item 2: the few that show how the notebook
#: answers its question stay open; the build folds every other code cell)
MAX_IDEA_CELLS = 5


def key(path: Path) -> str:
    return str(path.relative_to(ROOT / "notebooks").with_suffix(""))


def code_cells(path: Path) -> list[tuple[int, dict]]:
    cells = json.loads(path.read_text())["cells"]
    return [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "code"]


def tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def logic_lines(cell: dict) -> int:
    """Lines that compute, imports included: not blank, not a comment."""
    return sum(1 for line in "".join(cell["source"]).splitlines()
               if line.strip() and not line.strip().startswith("#"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_one_prologue_in_the_collapsed_setup_cell_and_one_epilogue(path):
    cells = code_cells(path)
    (where,) = [n for n, (_, c) in enumerate(cells) if "parameters" in tags(c)]
    setup = cells[where + 1][1]
    assert "hide-input" in tags(setup), f"{key(path)}: the setup cell is not collapsed"
    assert "robattr.start()" in "".join(setup["source"])
    for i, c in cells[where + 2:]:
        assert "robattr.start(" not in "".join(c["source"]), \
            f"{key(path)} cell {i}: a second prologue"
    assert "".join(cells[-1][1]["source"]).strip() == "run.finish()", \
        f"{key(path)}: the last code cell is not the epilogue `run.finish()`"
    for i, c in cells:
        text = "".join(c["source"])
        for copied in ("check_params", "set_theme(", "t_start"):
            assert copied not in text, \
                f"{key(path)} cell {i}: {copied!r} is the prologue's or epilogue's job"


def working_cells(path: Path) -> list[tuple[int, dict]]:
    """The code cells that compute: all but the parameters cell."""
    return [(i, c) for i, c in code_cells(path) if "parameters" not in tags(c)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_code_cells_are_short(path):
    long = [(i, logic_lines(c)) for i, c in working_cells(path) if logic_lines(c) > MAX_CELL_LINES]
    assert not long, (f"{key(path)}: code cells over {MAX_CELL_LINES} lines of logic "
                      f"(cell, lines): {long}; split them or move the logic into the chapter")


def test_the_median_code_cell_is_a_few_lines():
    sizes = sorted(logic_lines(c) for p in NOTEBOOKS for _, c in working_cells(p))
    median = sizes[len(sizes) // 2]
    assert median <= MAX_MEDIAN_LINES, f"median code cell: {median} lines of logic"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_no_code_line_is_long(path):
    long = [(i, len(line)) for i, c in working_cells(path)
            for line in "".join(c["source"]).splitlines() if len(line) > MAX_LINE_CHARS]
    assert not long, f"{key(path)}: lines over {MAX_LINE_CHARS} characters (cell, length): {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_no_function_or_class_is_defined_in_a_notebook(path):
    found = [(i, node.name) for i, c in code_cells(path)
             for node in ast.walk(ast.parse("".join(c["source"])))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert not found, f"{key(path)}: definitions belong in robattr.chapters.<key>: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_no_name_dodges_another_with_a_trailing_underscore(path):
    found = sorted({node.id for _, c in code_cells(path)
                    for node in ast.walk(ast.parse("".join(c["source"])))
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
                    and len(node.id) > 1 and node.id.endswith("_")})
    assert not found, f"{key(path)}: names ending in an underscore: {found}"


def _statements(path: Path) -> list[str]:
    """The notebook's code lines that compute, stripped (no blanks, comments, imports)."""
    out = []
    for _, c in working_cells(path):
        for line in "".join(c["source"]).splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "import ", "from ")):
                out.append(line)
    return out


def test_no_two_notebooks_share_a_block_of_code():
    seen: dict[tuple[str, ...], str] = {}
    shared = set()
    for p in NOTEBOOKS:
        lines = _statements(p)
        for j in range(len(lines) - SHARED_BLOCK + 1):
            block = tuple(lines[j:j + SHARED_BLOCK])
            first = seen.setdefault(block, key(p))
            if first != key(p):
                shared.add((first, key(p), block[0]))
    listing = "\n".join(f"  {a} and {b}: {line}" for a, b, line in sorted(shared))
    assert not shared, f"blocks of {SHARED_BLOCK} lines in two notebooks (move them):\n{listing}"


def test_no_helper_is_defined_in_two_notebooks():
    where = defaultdict(set)
    for p in NOTEBOOKS:
        for _, c in code_cells(p):
            for node in ast.parse("".join(c["source"])).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    where[node.name].add(key(p))
    copied = {name: sorted(keys) for name, keys in where.items() if len(keys) > 1}
    assert not copied, f"defined in more than one notebook (move them into robattr): {copied}"


def test_no_table_is_shown_twice():
    """``viz.show_table`` displays its table and returns it: as a cell's last expression the
    returned table is shown a second time (issue 41: Table 4 printed twice)."""
    twice = []
    for p in NOTEBOOKS:
        for i, c in code_cells(p):
            body = ast.parse("".join(c["source"])).body
            last = body[-1] if body else None
            if (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                    and ast.unparse(last.value.func).split(".")[-1] == "show_table"):
                twice.append(f"{key(p)} cell {i}")
    assert not twice, f"a table shown twice (assign the call: `_ = viz.show_table(...)`): {twice}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_a_few_code_cells_show_the_idea(path):
    """Issue 41 item 2: the build folds the code of every code cell but the parameters cell and
    the cells tagged ``idea``, so each notebook keeps one to MAX_IDEA_CELLS of them open."""
    ideas = [i for i, c in code_cells(path) if IDEA_TAG in tags(c)]
    assert ideas, f"{key(path)}: no code cell is tagged {IDEA_TAG!r}, so all its code is folded"
    assert len(ideas) <= MAX_IDEA_CELLS, \
        f"{key(path)}: {len(ideas)} code cells tagged {IDEA_TAG!r} (at most {MAX_IDEA_CELLS}): cells {ideas}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_only_the_prologue_binds_run(path):
    """``run`` is what ``robattr.start()`` returned; a loop variable of the same name broke
    ``run.finish()`` in one notebook."""
    found = [i for i, c in code_cells(path) if "robattr.start()" not in "".join(c["source"])
             for node in ast.walk(ast.parse("".join(c["source"])))
             if isinstance(node, ast.Name) and node.id == "run" and isinstance(node.ctx, ast.Store)]
    assert not found, f"{key(path)}: cells {found} rebind `run`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_the_prologue_comes_right_after_the_imports(path):
    """The parameters are checked, and the seed set, before the setup cell does any work."""
    cells = code_cells(path)
    (where,) = [n for n, (_, c) in enumerate(cells) if "parameters" in tags(c)]
    body = ast.parse("".join(cells[where + 1][1]["source"])).body
    first = next(node for node in body if not isinstance(node, (ast.Import, ast.ImportFrom)))
    assert ast.unparse(first) == "run = robattr.start()", \
        f"{key(path)}: the setup cell's first statement after its imports is {ast.unparse(first)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=key)
def test_every_cell_has_its_own_id(path):
    """nbformat 4.5 cells carry an id, unique in the notebook (a missing or repeated one is
    a warning today and an error in later nbformat versions)."""
    ids = [c.get("id") for c in json.loads(path.read_text())["cells"]]
    assert all(ids), f"{key(path)}: cells without an id: {[i for i, x in enumerate(ids) if not x]}"
    assert len(set(ids)) == len(ids), f"{key(path)}: repeated cell ids"

