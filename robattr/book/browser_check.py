"""Open every page of a built book in a real (headless) browser and list what a reader
would see go wrong: a JavaScript error, TeX that MathJax left untypeset or could not
parse, an image that does not load, a table pandas cut short, a progress bar or a warning
in a cell's output, "nan" in a table; and, counted per page, what a reader cannot cite or
read (issue 41): a formula split into two adjacent inline formulas, a figure without a
caption, a table wider than the page, pandas' row numbers (0, 1, 2, ...) shown as a
column, a raw Python repr (``np.float64(…)``, a dataclass, a dict dump) in an output.

    problems = check_book(Path("book/_build/html"))      # {page: [problem, ...]}

It drives Debian's Chromium (``/usr/bin/chromium``, or ``$ROBATTR_CHROMIUM``) through
Playwright's Python package; :func:`available` says whether both are present and, if not,
why (the tests skip with that reason). The checks themselves run as one script in the
page (:data:`PAGE_SCRIPT`), after the page and MathJax have finished.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from robattr import context

__all__ = ["CHROMIUM_ENV", "PAGE_SCRIPT", "chromium_path", "available", "check_pages",
           "check_book"]

CHROMIUM_ENV = context.CHROMIUM_ENV
#: flags for a headless Chromium on a machine without a network or a screen
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: Run in each page once it has loaded and MathJax (if any) has typeset: returns a list of
#: problems, each a short sentence.
PAGE_SCRIPT = r"""
async () => {
  const out = [];
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  for (const m of document.querySelectorAll('.math')) {
    if (!m.querySelector('mjx-container') && /\\\(|\\\[|\$\$|\\begin/.test(m.textContent)) {
      out.push('untypeset TeX: ' + m.textContent.trim().slice(0, 60));
    }
  }
  for (const e of document.querySelectorAll('mjx-merror')) {
    out.push('TeX error: ' + (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 80));
  }
  for (const img of document.querySelectorAll('img')) {
    if (!img.complete || img.naturalWidth === 0) {
      out.push('image does not load: ' + img.getAttribute('src'));
    }
  }
  for (const t of document.querySelectorAll('table')) {
    const text = t.innerText;
    if (t.classList.contains('dataframe') &&
        [...t.querySelectorAll('th, td')].some(c => c.innerText.trim() === '...' ||
                                                    c.innerText.trim() === '…')) {
      out.push('table cut by pandas (a "…" row or column)');
    }
    for (const c of t.querySelectorAll('td')) {
      if (/^\s*(nan|NaN|None)\s*$/.test(c.innerText)) {
        out.push('"' + c.innerText.trim() + '" in a table');
        break;
      }
    }
  }
  // issue 41: what a reader cannot cite or read. Counted once per page.
  let split = 0;
  for (const m of document.querySelectorAll('span.math')) {
    const gap = m.nextSibling, next = gap && gap.nextSibling;
    if (gap && gap.nodeType === 3 && /^\s+$/.test(gap.textContent) && next &&
        next.nodeType === 1 && next.matches('span.math')) split++;
  }
  if (split) out.push('formulas split in two: ' + split);
  let bare = 0;
  for (const img of document.querySelectorAll('.cell_output img, .output img')) {
    const fig = img.closest('figure');
    if (!fig || !fig.querySelector('figcaption')) bare++;
  }
  if (bare) out.push('figures without a caption: ' + bare);
  const article = document.querySelector('article') || document.documentElement;
  let wide = 0;
  for (const t of article.querySelectorAll('table')) {
    // a table in a cell's output must fit the output's box (narrower than the column),
    // else it scrolls inside it
    const box = t.closest('.cell_output, .output') || article;
    if (t.getBoundingClientRect().width > box.clientWidth + 1) wide++;
  }
  if (wide) out.push('tables wider than the page: ' + wide);
  let numbered = 0;
  for (const t of article.querySelectorAll('table')) {
    // pandas' default row numbers shown as a column: 0, 1, 2, ... in the first header cells
    // (a named index, "image" above 0, 1, 2, numbers something and is kept)
    const named = [...t.querySelectorAll('thead th:first-child')].some(h => h.textContent.trim());
    const heads = [...t.querySelectorAll('tbody tr')].map(r => r.querySelector('th'));
    if (!named && heads.length > 1 &&
        heads.every((h, i) => h && h.textContent.trim() === String(i))) numbered++;
  }
  if (numbered) out.push('row numbers shown as a column: ' + numbered);
  let reprs = 0;
  for (const o of document.querySelectorAll('.cell_output pre, .output pre')) {
    const text = o.innerText;
    if (/\b(?:np\.\w+|tensor|array|Scale|Verdict|Timestamp)\(/.test(text) ||
        /^\s*[A-Z]\w*\(\w+=/m.test(text) || /^\s*\{['"]/m.test(text)) reprs++;
  }
  if (reprs) out.push('raw Python reprs in outputs: ' + reprs);
  const outputs = document.querySelectorAll('.cell_output, .output');
  for (const o of outputs) {
    const text = o.innerText;
    if (/\d+ rows × \d+ columns/.test(text)) out.push('table cut by pandas: ' +
                                                      text.match(/\d+ rows × \d+ columns/)[0]);
    if (/\d+%\|.*\|\s*\d+\/\d+|it\/s\]|s\/it\]/.test(text)) {
      out.push('progress bar in an output: ' + text.trim().split('\n')[0].slice(0, 60));
    }
    if (/\b\w*Warning\b:/.test(text)) {
      out.push('warning in an output: ' + text.match(/\b\w*Warning\b:[^\n]*/)[0].slice(0, 80));
    }
    if (/^\s*[\w.]+(?:Error|Exception)\b:/m.test(text) || /Traceback \(most recent/.test(text)) {
      out.push('error in an output: ' + text.trim().split('\n')[0].slice(0, 80));
    }
  }
  return [...new Set(out)];
}
"""


#: console errors that are not faults of a page: the theme logs this one on the first page a
#: new browser profile opens (no colour mode stored yet) and then uses its default
_BENIGN_CONSOLE = ("Got invalid theme mode",)


def chromium_path() -> str | None:
    """The Chromium to drive: ``$ROBATTR_CHROMIUM``, else ``chromium`` on the PATH."""
    return context.current().chromium or shutil.which("chromium") or \
        shutil.which("chromium-browser")


def available() -> tuple[bool, str]:
    """``(True, "")`` when the check can run here, else ``(False, why)``."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False, "the Python package playwright is not installed (pip install playwright)"
    if not chromium_path():
        return False, ("no Chromium found (apt-get install chromium, or set "
                       f"{CHROMIUM_ENV} to a Chromium binary)")
    return True, ""


def check_pages(pages: list[Path], *, timeout_s: float = 30.0) -> dict[str, list[str]]:
    """Open each HTML file of ``pages`` and return ``{path: problems}`` (every page, an
    empty list when it is clean). JavaScript errors are those the page throws or logs to
    the console as errors."""
    from playwright.sync_api import sync_playwright

    ok, why = available()
    if not ok:
        raise RuntimeError(f"the browser check cannot run: {why}")
    out: dict[str, list[str]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=_FLAGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(f"JavaScript error: {e}"))
            page.on("console", lambda m: errors.append(f"JavaScript console error: {m.text}")
                    if m.type == "error" and not m.text.startswith(_BENIGN_CONSOLE) else None)
            for path in pages:
                errors.clear()
                page.goto(Path(path).resolve().as_uri(), wait_until="load",
                          timeout=timeout_s * 1000)
                found = _evaluate(page, timeout_s)
                out[str(path)] = [*dict.fromkeys(errors), *found]
        finally:
            browser.close()
    return out


def _evaluate(page, timeout_s: float, tries: int = 3) -> list[str]:
    """Run :data:`PAGE_SCRIPT`; a page that navigates on load (the book's index.html
    redirects to its first page) is checked where it lands."""
    from playwright.sync_api import Error

    for attempt in range(tries):
        try:
            return page.evaluate(PAGE_SCRIPT)
        except Error as err:
            if "context was destroyed" not in str(err) or attempt == tries - 1:
                raise
            page.wait_for_load_state("load", timeout=timeout_s * 1000)
    return []


def check_book(html_dir: Path, *, timeout_s: float = 30.0) -> dict[str, list[str]]:
    """:func:`check_pages` over every page of a built book (``_build/html``), except
    Sphinx's own search and index pages; keys are paths relative to ``html_dir``."""
    html_dir = Path(html_dir)
    skip = {"search.html", "genindex.html"}
    pages = sorted(p for p in html_dir.rglob("*.html")
                   if p.name not in skip and "_static" not in p.parts
                   and "_sources" not in p.parts)
    found = check_pages(pages, timeout_s=timeout_s)
    return {p.relative_to(html_dir).as_posix(): found[str(p)] for p in pages}
