"""A small Sphinx extension for the book's HTML (listed in ``_config.yml``).

It adds the book's stylesheet, ``robattr/book/static/robattr.css`` (tables that fit the
page), to every page.

Sphinx-thebe (which jupyter-book loads) adds its inline configuration script twice to
every page, and the second ``const THEBE_JS_URL`` is a JavaScript error ("Identifier
'THEBE_JS_URL' has already been declared") on all of them. This extension keeps the first
copy of every script a page would load twice.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["STATIC", "STYLESHEET", "dedupe_scripts", "add_static", "setup"]

#: The folder of the book's own static files, and its stylesheet there.
STATIC = Path(__file__).resolve().parent / "static"
STYLESHEET = "robattr.css"


def _key(script) -> tuple:
    attributes = getattr(script, "attributes", {}) or {}
    filename = getattr(script, "filename", script) or ""     # an inline script: None or ""
    return (str(filename), tuple(sorted(attributes.items())))


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """``html-page-context`` handler: drop repeated entries of ``context["script_files"]``."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def add_static(app, config) -> None:
    """``config-inited`` handler: serve :data:`STATIC` beside the project's own static paths."""
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", add_static)
    app.add_css_file(STYLESHEET)
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
