"""The example chapter: what only its notebooks use (see robattr.chapters)."""
