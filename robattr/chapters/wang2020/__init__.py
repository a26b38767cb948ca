"""The wang2020 chapter: what only its notebooks use (see robattr.chapters)."""
