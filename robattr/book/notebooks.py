"""The book's notebooks: where the book is, which notebooks it has, what each declares.

A *notebook* is a source file under ``notebooks/`` with one cell tagged
``parameters``. Its *key* is its path below ``notebooks/`` without the suffix
(``example/digits_saliency``). Each parameter is a top-level assignment in that
cell; its default is the literal on the right, and the comment declares its rule
and its help, ``name = 3  # int >= 1 | help`` (the rule syntax is in
:mod:`robattr.book.params`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from robattr import context
from robattr.book.params import Parameter, ParameterError, read_cell

__all__ = ["Notebook", "project_root", "read_parameters", "parameters_cell_index",
           "discover", "find", "defaults"]


@dataclass(frozen=True)
class Notebook:
    """One source notebook: its file, its key and its declared parameters."""

    path: Path                      # absolute path of the source notebook
    key: str                        # path below notebooks/, no suffix, '/'-separated
    parameters: dict[str, Parameter] = field(hash=False)

    @property
    def defaults(self) -> dict:
        """Each parameter's default, by name: the values the notebook runs with alone."""
        return {name: p.default for name, p in self.parameters.items()}

    def output(self, book_dir: Path) -> Path:
        """Where the build writes this notebook executed: ``<book_dir>/<key>.ipynb``."""
        return book_dir / f"{self.key}.ipynb"


def project_root(start: str | os.PathLike | None = None) -> Path:
    """The folder holding ``_toc.yml`` and ``notebooks/``: ``$ROBATTR_ROOT``, else the
    first such folder at or above ``start`` (default: the working directory)."""
    env = context.current().root
    here = Path(env or start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file() and (folder / "notebooks").is_dir():
            return folder
    raise FileNotFoundError(
        f"no robattr book found at or above {here} (looked for _toc.yml and notebooks/); "
        "run from the repository or set ROBATTR_ROOT")


def parameters_cell_index(path: str | os.PathLike) -> int:
    """The index of the one cell tagged ``parameters`` in the notebook at ``path``
    (a ValueError when there is not exactly one)."""
    cells = json.loads(Path(path).read_text()).get("cells", [])
    found = [i for i, c in enumerate(cells)
             if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(found) != 1:
        raise ValueError(f"{path}: expected exactly one cell tagged 'parameters', "
                         f"found {len(found)}")
    return found[0]


def read_parameters(path: str | os.PathLike) -> dict[str, Parameter]:
    """Parameters of a notebook: the declared lines of its ``parameters`` cell
    (``name = literal  # RULE | help``, :mod:`robattr.book.params`)."""
    cell = json.loads(Path(path).read_text())["cells"][parameters_cell_index(path)]
    source = cell["source"]
    source = "".join(source) if isinstance(source, list) else source
    return read_cell(source, where=str(path))


def discover(root: str | os.PathLike | None = None) -> list[Notebook]:
    """Every source notebook under ``<root>/notebooks``, sorted by key."""
    root = project_root(root)
    base = root / "notebooks"
    found = []
    for path in sorted(base.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        key = path.relative_to(base).with_suffix("").as_posix()
        found.append(Notebook(path, key, read_parameters(path)))
    return found


def find(name: str, notebooks: Iterable[Notebook]) -> Notebook:
    """A notebook by key, by path (absolute or relative to the root/cwd), or by file name."""
    notebooks = list(notebooks)
    wanted = Path(name)
    for nb in notebooks:
        if name in (nb.key, f"{nb.key}.ipynb", f"notebooks/{nb.key}.ipynb", nb.path.name,
                    nb.path.stem):
            return nb
        if wanted.exists() and wanted.resolve() == nb.path:
            return nb
    keys = ", ".join(nb.key for nb in notebooks)
    raise ParameterError(f"no notebook {name!r}; known notebooks: {keys}")


def defaults(key: str, root: str | os.PathLike | None = None) -> dict:
    """The parameter defaults of the source notebook ``key`` (``"wang2020/table2_attacks"``)
    of the book at or above ``root`` (:func:`project_root`)."""
    path = project_root(root) / "notebooks" / f"{key}.ipynb"
    if not path.is_file():
        raise ParameterError(f"no notebook {key!r}: {path} does not exist")
    return {name: p.default for name, p in read_parameters(path).items()}
