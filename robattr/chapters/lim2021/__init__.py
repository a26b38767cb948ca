"""The lim2021 chapter: what only its notebooks use (see robattr.chapters)."""
