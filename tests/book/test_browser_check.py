"""The browser check flags each fault it names, on small hand-made pages (and passes a
clean one). The whole built book is checked in tests/book/test_book.py."""
from __future__ import annotations

import pytest

from robattr.book import browser_check

ok, why = browser_check.available()
needs_browser = pytest.mark.skipif(not ok, reason=f"browser check skipped: {why}")

#: a 1x1 PNG that loads
PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
         "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
CLEAN = "<html><body><p>fine</p><table><tr><td>1.0</td></tr></table></body></html>"
FAULTS = {
    "js": ("<script>undefined_function()</script>", "JavaScript error"),
    "console": ("<script>console.error('boom')</script>", "JavaScript console error: boom"),
    "img": ('<img src="missing.png">', "image does not load: missing.png"),
    "nan": ("<table><tr><td>nan</td></tr></table>", '"nan" in a table'),
    "dots": ('<table class="dataframe"><tr><td>1</td><td>...</td></tr></table>',
             "table cut by pandas"),
    "dims": ('<div class="cell_output"><p>4 rows × 24 columns</p></div>',
             "table cut by pandas: 4 rows × 24 columns"),
    "bar": ('<div class="cell_output"><pre>zoo:  50%|#####     | 5/10 [19:52&lt;32:24, '
            '388.92s/it]</pre></div>', "progress bar in an output"),
    "warn": ('<div class="cell_output"><pre>TqdmWarning: IProgress not found</pre></div>',
             "warning in an output: TqdmWarning: IProgress not found"),
    "error": ('<div class="cell_output"><pre>ValueError: bad</pre></div>',
              "error in an output: ValueError: bad"),
    "tex": (r'<span class="math">\(x^2\)</span>', r"untypeset TeX: \(x^2\)"),
    "split": ('<p><span class="math">a</span> <span class="math">= b</span></p>',
              "formulas split in two: 1"),
    "caption": (f'<div class="cell_output"><img src="{PIXEL}"></div>'
                f'<div class="cell_output"><figure><img src="{PIXEL}">'
                '<figcaption>Fig. 1</figcaption></figure></div>',
                "figures without a caption: 1"),
    "wide": ('<article style="width: 300px"><table style="width: 900px"><tr><td>1</td></tr>'
             '</table></article>', "tables wider than the page: 1"),
    "rownumbers": ('<table><thead><tr><th></th><th>a</th></tr></thead><tbody>'
                   '<tr><th>0</th><td>x</td></tr><tr><th>1</th><td>y</td></tr></tbody></table>'
                   '<table><tbody><tr><th>CE</th><td>1</td></tr><tr><th>AT</th><td>2</td></tr>'
                   '</tbody></table><table><thead><tr><th>image</th><th></th></tr></thead><tbody>'
                   '<tr><th>0</th><td>x</td></tr><tr><th>1</th><td>y</td></tr></tbody></table>',
                   "row numbers shown as a column: 1"),
    "repr": ('<div class="cell_output"><pre>np.float64(0.5)</pre><pre>Scale(dataset=1)</pre>'
             '<pre>a plain line</pre></div>', "raw Python reprs in outputs: 2"),
}


@needs_browser
def test_each_fault_is_flagged_and_a_clean_page_passes(tmp_path):
    pages = []
    (tmp_path / "clean.html").write_text(CLEAN)
    pages.append(tmp_path / "clean.html")
    for name, (body, _) in FAULTS.items():
        path = tmp_path / f"{name}.html"
        path.write_text(f"<html><body>{body}</body></html>")
        pages.append(path)
    found = browser_check.check_pages(pages)
    assert found[str(tmp_path / "clean.html")] == []
    for name, (_, want) in FAULTS.items():
        problems = found[str(tmp_path / f"{name}.html")]
        assert any(want in p for p in problems), f"{name}: {problems}"
    book = browser_check.check_book(tmp_path)
    assert "clean.html" in book and book["clean.html"] == []


def test_the_sphinx_extension_keeps_one_copy_of_each_script():
    from types import SimpleNamespace

    from robattr.book import sphinx_ext

    def js(filename, **attributes):
        return SimpleNamespace(filename=filename, attributes=attributes)

    thebe_a, thebe_b = js(None, body="const THEBE_JS_URL = 1"), js("", body="const THEBE_JS_URL = 1")
    other = js("_static/x.js", defer="defer")
    context = {"script_files": [thebe_a, other, thebe_b, js("_static/x.js", defer="defer")]}
    sphinx_ext.dedupe_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] == [thebe_a, other]


def test_the_sphinx_extension_serves_the_stylesheet_that_fits_tables_to_the_page():
    """The extension registers robattr.css on every page and serves its folder once; the
    stylesheet wraps table headers (the browser check's wide tables, issue 41)."""
    from types import SimpleNamespace

    from robattr.book import sphinx_ext

    calls = []
    app = SimpleNamespace(connect=lambda *a, **k: calls.append(("connect", a[0])),
                          add_css_file=lambda name: calls.append(("css", name)))
    sphinx_ext.setup(app)
    assert ("css", sphinx_ext.STYLESHEET) in calls and ("connect", "config-inited") in calls
    config = SimpleNamespace(html_static_path=["book/mathjax"])
    sphinx_ext.add_static(app, config)
    sphinx_ext.add_static(app, config)
    assert config.html_static_path == ["book/mathjax", str(sphinx_ext.STATIC)]
    css = (sphinx_ext.STATIC / sphinx_ext.STYLESHEET).read_text()
    assert "overflow-wrap: anywhere" in css and "white-space: normal" in css
