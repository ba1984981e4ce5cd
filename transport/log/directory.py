"""The files of a log directory beside its segments: the writers' lock and the log's id."""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Held (``flock``, exclusive) by a writer while it appends.
LOCK_FILE = ".lock"
#: A random id written once, when a writer first opens the log: what tells two logs apart.
ID_FILE = "log.id"


def log_id(directory: Path) -> str | None:
    """The log's id, or None for a log no writer has opened since ids were introduced."""
    try:
        return (directory / ID_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def ensure_log_id(directory: Path) -> str:
    """The log's id, written first if it has none (atomically: writers racing agree on one)."""
    existing = log_id(directory)
    if existing is not None:
        return existing
    tmp = directory / f".{ID_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{uuid.uuid4().hex}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, directory / ID_FILE)  # the first writer's id wins
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return (directory / ID_FILE).read_text().strip()


@contextmanager
def writers_idle(directory: Path) -> Iterator[bool]:
    """Whether no writer is appending; while the block runs, none starts (a shared ``flock`` on
    the writers' lock). A log without the lock file has never had a writer."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # drops the lock
