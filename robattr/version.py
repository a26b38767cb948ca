"""robattr's version, in a module of its own so that no module imports the package root for
it (pyproject.toml states the same number; ``tests/book/test_packaging.py`` checks they agree)."""

__version__ = "0.1.0"
