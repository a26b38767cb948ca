"""The crosspaper chapter: what only its notebooks use (see robattr.chapters)."""
