"""Stamps: what each executed page of the book depends on, so an unchanged page is skipped.

``book/.robattr-stamps.json`` maps a notebook key to its last successful run: the
*stamp* (a hash of the source notebook, the resolved parameters, the precision on CUDA
and robattr's own code, :func:`stamp`), the parameters, the profile, the precision and
the seconds the run took. Every read-modify-write of the file happens under
:func:`stamps_lock`, an exclusive lock on the book folder, so two builds (or a ``run``
and a ``build``) at once merge their changes instead of each writing back what it read
at its start.
"""
from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robattr.version import __version__

if TYPE_CHECKING:
    from robattr.book.notebooks import Notebook

__all__ = ["STAMPS", "package_hash", "stamp", "read_stamps", "write_stamps", "stamps_lock"]

STAMPS = ".robattr-stamps.json"
#: The robattr package folder: every .py and .yml below it is part of a stamp.
_PACKAGE_DIR = Path(__file__).parents[1]


def package_hash() -> str:
    """A hash of robattr's version and of every ``.py`` and ``.yml`` file of the package
    (paths and bytes), so a change anywhere in robattr re-executes the book."""
    h = hashlib.sha256(__version__.encode())
    for path in sorted(_PACKAGE_DIR.rglob("*")):
        if path.suffix in {".py", ".yml"}:
            h.update(path.relative_to(_PACKAGE_DIR).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def stamp(nb: Notebook, params: dict[str, Any], precision: str = "fp32",
          train_size: int | dict | None = None, recipe: dict | None = None) -> str:
    """What an executed notebook depends on: its source, parameters, the precision on
    CUDA (:func:`robattr.book.profiles.effective_precision`), the zoo's training-set size
    and recipes when set (:func:`robattr.book.profiles.effective_train_size`,
    :func:`~robattr.book.profiles.effective_recipe`) and the package."""
    h = hashlib.sha256(nb.path.read_bytes())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    h.update(precision.encode())
    if train_size is not None:
        size = json.dumps(train_size, sort_keys=True) if isinstance(train_size, dict) else train_size
        h.update(f"train_size={size}".encode())
    if recipe:
        h.update(f"recipe={json.dumps(recipe, sort_keys=True)}".encode())
    h.update(package_hash().encode())
    return h.hexdigest()


def read_stamps(book_dir: Path) -> dict[str, Any]:
    """The stamps of ``book_dir`` (empty when the file is missing or unreadable)."""
    try:
        return json.loads((Path(book_dir) / STAMPS).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def write_stamps(book_dir: Path, stamps: dict[str, Any]) -> None:
    """Replace the stamps of ``book_dir`` atomically (hold :func:`stamps_lock` around
    the read that produced ``stamps`` and this write)."""
    book_dir = Path(book_dir)
    book_dir.mkdir(parents=True, exist_ok=True)
    tmp = book_dir / f"{STAMPS}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(stamps, indent=1, sort_keys=True))
    os.replace(tmp, book_dir / STAMPS)


@contextmanager
def stamps_lock(book_dir: Path):
    """An exclusive lock on the book's stamps, so that two builds (or a run and a build)
    at once merge their changes instead of each writing back what it read at its start."""
    import fcntl

    book_dir = Path(book_dir)
    book_dir.mkdir(parents=True, exist_ok=True)
    with open(book_dir / f"{STAMPS}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
