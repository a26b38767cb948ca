"""A chapter package's public names, loaded on first use.

Each chapter package (``robattr.chapters.<key>``) re-exports the public names (``__all__``)
of its modules, so that ``from robattr.chapters import wang2020; wang2020.X`` works. It
loads those modules only when a name is asked for: reading a chapter's cost declarations
(``robattr.chapters.<key>.plan``) runs the package's ``__init__`` and must stay cheap (no
torch). A chapter's ``__init__.py`` says::

    from robattr.chapters._exports import exports
    __getattr__, __dir__ = exports(__name__, ("setup", "tables"))
"""
from __future__ import annotations

import importlib

__all__ = ["exports", "CHEAP"]

#: The submodules of a chapter that ``robattr plan`` reads, torch-free: asking the package
#: for one of them imports that module only.
CHEAP = ("plan", "specs")


def exports(package: str, modules: tuple[str, ...]):
    """``(__getattr__, __dir__)`` for the package ``package`` that re-exports the names of
    ``__all__`` of each of its ``modules`` (names of submodules of ``package``). A name two
    modules export is an error, found when the names are first read."""
    found: dict[str, object] = {}

    def table() -> dict[str, object]:
        if not found:
            names: dict[str, object] = {}
            for name in modules:
                module = importlib.import_module(f"{package}.{name}")
                for attr in module.__all__:
                    if attr in names:
                        raise ImportError(f"{package}: {attr!r} is exported by two modules "
                                          f"({names[attr].__name__} and {module.__name__})")
                    names[attr] = module
            found.update(names)
        return found

    def __getattr__(name: str):
        if name == "__all__":
            return sorted(table())
        # a dunder, a private name or a submodule (``plan``, ``specs``: read by ``robattr
        # plan`` without torch) is not a re-exported name: answering it must not load the
        # chapter's modules
        if name.startswith("_") or name in modules or name in CHEAP:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if name in table():
            return getattr(found[name], name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(table()) | set(modules))

    return __getattr__, __dir__
