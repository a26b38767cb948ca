"""The HTML book: the Verdicts page, then ``jupyter-book build`` into ``book/_build/html``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from robattr.book import verdicts_page
from robattr.book.notebooks import project_root

__all__ = ["build_html"]


def build_html(root: str | os.PathLike | None = None, *, log=print) -> Path:
    """Write the Verdicts page from the recorded claims (when the table of contents lists
    it), run ``jupyter-book build`` on the project; return the path of ``index.html``."""
    root = project_root(root)
    if (root / "_toc.yml").read_text().find(f"book/{Path(verdicts_page.PAGE).stem}") >= 0:
        verdicts_page.write(root, log=log)
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(root),
           "--path-output", str(root / "book")]
    log("building the HTML book (jupyter-book)")
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"jupyter-book build failed:\n{tail}")
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    for line in warnings[:20]:
        log(line)
    index = root / "book" / "_build" / "html" / "index.html"
    log(f"book: {index}")
    return index
