"""Durable file writes: temp file, fsync, atomic rename, fsync of the directory.

Readers (DuckDB globbing ``*.parquet``) only ever see complete files: the temp name starts
with a dot and does not end in ``.parquet``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


def write_durably(path: Path, write: Callable[[Path], None], temp: Path | None = None) -> None:
    """Call ``write(temp)``, then make ``temp`` durable and rename it to ``path``. ``temp``
    defaults to :func:`temp_path`: the one name a crashed writer's leftover is found by."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp or temp_path(path)
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_atomically(path: Path, data: bytes) -> None:
    """Durably replace ``path`` with ``data``. Writers may race (a periodic report and the one at
    close): each thread of each process writes a temp file of its own, the last rename wins whole."""

    def write(tmp: Path) -> None:
        tmp.write_bytes(data)

    write_durably(path, write, path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp"))


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
