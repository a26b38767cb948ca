"""The wangkong2023 chapter: what only its notebooks use (see robattr.chapters)."""
