"""One trainer per model: a lock file per key in the zoo folder, shared by the processes
and nodes that share the cache folder (see :mod:`robattr.zoo`)."""
from __future__ import annotations

import contextlib
import os
import platform
import time
from pathlib import Path

from robattr import context
from robattr.utils import process_start
from robattr.zoo.store import zoo_dir

__all__ = ["train_lock"]

def _stale_seconds() -> float:
    """Seconds after which a lock whose owner cannot be checked is taken over
    (``$ROBATTR_ZOO_LOCK_STALE``, default a day: :mod:`robattr.context`)."""
    return context.current().zoo_lock_stale


def _lock_owner_gone(lock: Path) -> bool:
    """Whether the writer of ``lock`` is gone: same host, its pid runs no process begun before
    the lock (pids recur after a restart; 2 s slack); else older than :func:`_stale_seconds`."""
    try:
        host, pid, started = lock.read_text().split()
        age = time.time() - float(started)
    except (OSError, ValueError):        # being written, or garbled: judge by the file's age
        try:
            age = time.time() - lock.stat().st_mtime
        except OSError:
            return False                  # vanished: the next attempt will succeed
        return age > _stale_seconds()
    if host == platform.node():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return (process_start(int(pid)) or 0.0) > float(started) + 2.0   # None: no /proc
    return age > _stale_seconds()


@contextlib.contextmanager
def train_lock(key: str, poll: float = 0.5):
    """An exclusive lock file ``<key>.lock`` in the zoo folder (``O_CREAT | O_EXCL``: atomic
    on local and NFSv3+ file systems); a stale one (:func:`_lock_owner_gone`) is removed."""
    lock = zoo_dir() / f"{key}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            if _lock_owner_gone(lock):
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
                continue
            time.sleep(poll)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{platform.node()} {os.getpid()} {time.time()}\n")
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
