"""A small Sphinx extension for the book's HTML (listed in ``_config.yml``).

Sphinx-thebe (which jupyter-book loads) adds its inline configuration script twice to
every page, and the second ``const THEBE_JS_URL`` is a JavaScript error ("Identifier
'THEBE_JS_URL' has already been declared") on all of them. This extension keeps the first
copy of every script a page would load twice.
"""
from __future__ import annotations

__all__ = ["dedupe_scripts", "setup"]


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


def setup(app):
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
