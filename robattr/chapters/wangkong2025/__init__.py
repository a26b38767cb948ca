"""The wangkong2025 chapter: what only its notebooks use (see robattr.chapters)."""
