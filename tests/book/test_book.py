"""End to end: every notebook through the pipeline (smoke profile), then the HTML book."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from robattr import zoo
from robattr.book import builder, plan, profiles
from robattr.book.notebooks import discover

ROOT = Path(__file__).resolve().parents[2]


def toc_files(toc: dict) -> list[str]:
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return files


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A copy of the book's sources, built with the smoke profile."""
    dst = tmp_path_factory.mktemp("book") / "proj"
    ignore = shutil.ignore_patterns("_build", "*.ipynb", ".robattr-stamps.json", "mathjax")
    shutil.copytree(ROOT / "book", dst / "book", ignore=ignore)
    shutil.copytree(ROOT / "notebooks", dst / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, dst / name)
    if (ROOT / "reference").is_dir():            # the committed reference runs, shown by the build
        shutil.copytree(ROOT / "reference", dst / "reference",
                        ignore=shutil.ignore_patterns("*.lock"))
    if (ROOT / "book" / "mathjax").is_dir():      # installed by `make`; copied for the maths check
        shutil.copytree(ROOT / "book" / "mathjax", dst / "book" / "mathjax")
    mp = pytest.MonkeyPatch()
    mp.setenv("ROBATTR_CACHE", str(dst / "cache"))
    mp.delenv("ROBATTR_TRAIN_SIZE", raising=False)
    mp.delenv("ROBATTR_RECIPE", raising=False)
    mp.setenv(zoo.REQUESTS_ENV, str(dst / "zoo-requests.jsonl"))   # every get_model call
    report = builder.build(dst, profile="smoke", progress=False, log=lambda *a: None)
    yield dst, report
    mp.undo()


@pytest.mark.slow
def test_every_notebook_runs_in_the_smoke_profile(built):
    dst, report = built
    assert report.failed == [], "\n".join(map(str, report.failed))
    keys = {nb.key for nb in discover(dst)}
    assert set(report.executed) == keys


def figure_cells_with_more_than_a_figure(executed: Path) -> list[int]:
    """The code cells of an executed notebook that carry a figure caption (myst-nb's
    ``mystnb.figure``) and show more than one rich output: myst-nb wraps each in the figure,
    under one label, which Sphinx reports as a duplicate target."""
    cells = json.loads(executed.read_text())["cells"]
    return [i for i, c in enumerate(cells) if c["cell_type"] == "code"
            and "figure" in c.get("metadata", {}).get("mystnb", {})
            and sum(o["output_type"] in ("display_data", "execute_result")
                    for o in c.get("outputs", [])) > 1]


@pytest.mark.slow
def test_a_figure_cell_shows_one_figure_and_nothing_else(built):
    dst, _ = built
    bad = {nb.key: cells for nb in discover(dst)
           if (cells := figure_cells_with_more_than_a_figure(dst / "book" / f"{nb.key}.ipynb"))}
    assert not bad, f"figure cells that also show a table or a value (split them): {bad}"


@pytest.mark.slow
def test_every_notebook_asks_the_zoo_for_exactly_its_declared_models(built):
    """robattr plan's declarations (robattr/chapters/<key>/plan.py) against the smoke run:
    the zoo models each notebook asked for (cache hits included) are the ones it declares."""
    dst, report = built
    asked: dict[str, set] = {}
    for call in zoo.request_log(dst / "zoo-requests.jsonl"):
        asked.setdefault(call["notebook"], set()).add(json.dumps(call["config"], sort_keys=True))
    prof = profiles.load_profile("smoke")
    for nb in discover(dst):
        params = profiles.resolve(nb, prof)
        declared = {json.dumps(c, sort_keys=True) for c in plan.declared_models(nb.key, params)}
        assert asked.get(nb.key, set()) == declared, nb.key


@pytest.mark.slow
def test_every_toc_page_is_in_the_html(built):
    dst, report = built
    toc = yaml.safe_load((dst / "_toc.yml").read_text())
    html = dst / "book" / "_build" / "html"
    assert report.html == html / "index.html" and report.html.exists()
    missing = [f for f in toc_files(toc) if not (html / f"{f}.html").exists()]
    assert missing == []


@pytest.mark.slow
def test_every_notebook_page_collapses_its_setup_cell(built):
    dst, _ = built
    html = dst / "book" / "_build" / "html" / "book"
    for nb in discover(dst):
        page = (html / f"{nb.key}.html").read_text()
        assert "tag_hide-input" in page, f"{nb.key}: no collapsed setup cell in the HTML"


@pytest.mark.slow
def test_example_page_has_its_figure_and_local_maths(built):
    dst, _ = built
    page = (dst / "book" / "_build" / "html" / "book" / "example" / "digits_saliency.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]*\.png\"", page)) >= 2   # heatmaps and the curve
    assert "Traceback" not in page
    if (ROOT / "book" / "mathjax").is_dir():
        assert "tex-mml-chtml.js" in page and "cdn.jsdelivr.net" not in page
        assert (dst / "book" / "_build" / "html" / "_static" / "tex-mml-chtml.js").exists()


@pytest.mark.slow
def test_exercises_are_numbered_within_their_paper_chapter(built):
    """Issue 41: a student's first exercise of a chapter is "Exercise <chapter>.1", not the
    book-wide count (the papers' part of the table of contents is numbered, and
    numfig_secnum_depth 1 prefixes the chapter's number)."""
    dst, _ = built
    html = dst / "book" / "_build" / "html" / "book"
    toc = yaml.safe_load((dst / "_toc.yml").read_text())
    (papers,) = [p for p in toc["parts"] if p["caption"] == "The papers"]
    for number, chapter in enumerate(papers["chapters"], start=1):
        found = []
        for section in chapter.get("sections", []):
            page = (html / f"{section['file'].removeprefix('book/')}.html").read_text()
            found += re.findall(r"Exercise (\d+(?:\.\d+)?)", page)
        assert found, chapter["file"]
        first = sorted(set(found), key=lambda n: [int(p) for p in n.split(".")])[0]
        assert first == f"{number}.1", (chapter["file"], sorted(set(found)))


def test_every_source_notebook_is_in_the_toc():
    toc = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    for nb in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        page = f"book/{nb.parent.name}/{nb.stem}"
        assert page in toc, f"{nb.relative_to(ROOT)} is not in _toc.yml (add {page})"


@pytest.mark.slow
def test_recorded_results_are_written_next_to_the_page(built):
    from robattr.report import results

    dst, _ = built
    df = results.read(dst / "book" / "example" / "digits_saliency.results.csv")
    acc = df.loc[df["metric"] == "test_acc", "value"]
    assert len(acc) == 1 and 0.0 <= acc.item() <= 1.0
    assert set(df.loc[df["metric"] == "grad_cosine", "eps"]) == {0.0, 0.02, 0.05, 0.1, 0.2}


def test_every_exercise_has_a_solution():
    """sphinx-exercise pairs: each {exercise} label is solved by a {solution}."""
    import nbformat

    for nb_path in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        text = "\n".join(c.source for c in nbformat.read(nb_path, 4).cells
                         if c.cell_type == "markdown")
        labels = re.findall(r"```\{exercise\}\s*\n:label:\s*(\S+)", text)
        solved = re.findall(r"```\{solution\}\s+(\S+)", text)
        assert sorted(labels) == sorted(solved), nb_path.name


@pytest.mark.parametrize("name", ["smoke", "quick", "paper"])
def test_every_shipped_profile_resolves_for_every_notebook(name):
    """A misspelt name or a bad value in a profile (paper.yml and the chapter files)
    fails here, not hours into a GPU run: every notebook's parameters resolve and pass
    their declared rules, and every notebook key the profile names exists."""
    notebooks = discover(ROOT)
    prof = profiles.load_profile(name)
    profiles.check_profile_keys(prof, notebooks, name)
    for nb in notebooks:
        values = profiles.resolve(nb, prof)
        assert set(values) == set(nb.parameters), nb.key
    if name == "paper":        # the paper profile really changes the data of every chapter
        changed = {nb.key.split("/")[0] for nb in notebooks
                   if profiles.resolve(nb, prof) != profiles.resolve(nb, "quick")}
        assert changed == {nb.key.split("/")[0] for nb in notebooks}


@pytest.mark.slow
def test_every_kept_reference_is_shown_beside_the_build(built):
    from robattr.report import results
    from robattr.book import reference

    dst, _ = built
    names = reference.profiles(dst)
    if not names:
        pytest.skip("no reference run is committed")
    page = (dst / "book" / "verdicts.md").read_text()
    for name in names:
        assert f" {name} ref |" in page and f"## Where the {name} reference decides otherwise" in page
        for key, state in reference.status(dst, name).items():
            metrics = set(results.read(reference.results_file(dst, name, key))["metric"]) \
                if state != "missing" else set()
            if metrics & {"compare", "claim"}:     # its page shows the reference and what it is
                html = (dst / "book" / "_build" / "html" / "book" / f"{key}.html").read_text()
                assert f"{name} ref" in html, key
                # a table's note names the run; a claim's line gives its label
                said = (f"{name} ref (", f"a kept run of the {name} profile")
                assert any(s in html for s in said), key


#: Issue 41 §3 and §7: what the browser check counts but the book had not fixed yet, with the
#: number of pages of the smoke build allowed to show it. Empty since 2026-11-29 (the last
#: kind, tables wider than their output's box, went from 18 pages to 0): every kind the check
#: names is enforced at 0 pages; a kind added here needs a dated reason.
PENDING_PAGES: dict[str, int] = {}


@pytest.mark.slow
def test_every_built_page_passes_the_browser_check(built):
    """Every page of the built book, opened in headless Chromium: no JavaScript error, no
    untypeset TeX, no broken image, no table cut by pandas, no progress bar, warning or
    error in an output, no "nan" in a table (robattr.book.browser_check); split formulas,
    captionless figures, wide tables and raw reprs on no more pages than PENDING_PAGES."""
    from robattr.book import browser_check

    ok, why = browser_check.available()
    if not ok:
        pytest.skip(f"browser check skipped: {why}")
    dst, _ = built
    found = browser_check.check_book(dst / "book" / "_build" / "html")
    assert len(found) >= len(toc_files(yaml.safe_load((dst / "_toc.yml").read_text())))
    pending = {kind: sorted(page for page, problems in found.items()
                            if any(p.startswith(kind + ":") for p in problems))
               for kind in PENDING_PAGES}
    counts = {kind: f"{len(pages)} page(s), at most {PENDING_PAGES[kind]}"
              for kind, pages in pending.items()}
    print("browser check, pending kinds:", counts)
    over = {kind: pages for kind, pages in pending.items() if len(pages) > PENDING_PAGES[kind]}
    assert not over, f"more pages than before (these only go down): {counts}; {over}"
    bad = {page: rest for page, problems in found.items()
           if (rest := [p for p in problems if p.split(":")[0] not in PENDING_PAGES])}
    assert bad == {}, "\n".join(f"{p}: {'; '.join(v)}" for p, v in bad.items())
