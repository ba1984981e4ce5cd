"""Appending to the local log: batches, fsync, safe for several writer processes."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

from specmetrics.transport.log.directory import LOCK_FILE, ensure_log_id
from specmetrics.transport.log.segment import (
    frame,
    list_segments,
    overlapping_segment,
    preamble,
    read_identity,
    records_start,
    scan_segment,
    segment_path,
)

DEFAULT_SEGMENT_BYTES = 128 * 1024 * 1024


class LocalLogWriter:
    """Appends batches of records; each batch is written and fsynced before ``append`` returns.

    Writers in several processes may share one directory: every append takes an exclusive
    ``flock`` and first catches up with what the others wrote. A torn tail left by a killed
    writer is cut off before the next append, so offsets stay dense and monotonic; nothing else is
    ever cut: damaged records keep their offsets, and appends go after them. A last segment whose
    base is below the end of the one before it is refused (:class:`LogCorrupted`).
    """

    def __init__(self, directory: Path | str, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log_id = ensure_log_id(self.directory)
        self._segment_bytes = segment_bytes
        self._lock_fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        self._base = -1  # base offset of the segment open in _fd
        self._fd = -1
        self._size = 0  # bytes known valid in the open segment
        self._start = 0  # where its records start: after its preamble, if it has one
        self._next_offset = 0

    @property
    def next_offset(self) -> int:
        """The offset the next record will get (as of this writer's last append)."""
        return self._next_offset

    def append(self, payloads: Sequence[bytes]) -> tuple[int, int]:
        """Append ``payloads`` as consecutive records; returns ``(first, last)`` offsets."""
        if not payloads:
            raise ValueError("append needs at least one record")
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._catch_up()
            if self._size >= self._segment_bytes:
                self._open_segment(self._next_offset, create=True)
            first = self._next_offset
            data = memoryview(b"".join(frame(first + i, p) for i, p in enumerate(payloads)))
            try:
                written = 0
                while written < len(data):  # a short write is retried: the retry raises the real error (ENOSPC)
                    step = os.pwrite(self._fd, data[written:], self._size + written)
                    if step == 0:
                        raise OSError(f"no progress writing {segment_path(self.directory, self._base)}")
                    written += step
                os.fsync(self._fd)
            except BaseException:
                os.ftruncate(self._fd, self._size)  # a batch is appended whole or not at all
                raise
            self._size += len(data)
            self._next_offset = first + len(payloads)
            return first, self._next_offset - 1
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _catch_up(self) -> None:
        """Under the lock: find the true end of the log and cut off a torn tail."""
        segments = list_segments(self.directory)
        if not segments:
            self._open_segment(0, create=True)
            return
        last = segments[-1]
        path = segment_path(self.directory, last)
        if last != self._base:
            if len(segments) > 1:
                self._check_follows(segments[-2], last)
            self._open_segment(last, create=False, after_preamble=len(segments) > 1 and read_identity(
                segment_path(self.directory, segments[-2])) is not None)
        size = os.fstat(self._fd).st_size
        if size == self._size and self._size:
            return
        # What this writer wrote or checked stays valid (others only append or cut torn tails past
        # it): scan only what others appended since, not the whole segment.
        known = (self._size, self._next_offset) if self._start < self._size <= size else (0, -1)
        end = scan_segment(path, last, known)
        if end.torn:
            os.ftruncate(self._fd, end.size)
        self._size, self._next_offset = end.size, end.next_offset

    def _check_follows(self, previous: int, base: int) -> None:
        """Refuse a last segment whose base is below the end of the records of the one before it."""
        known = (self._size, self._next_offset) if previous == self._base else (0, -1)
        end = scan_segment(segment_path(self.directory, previous), previous, known)
        if end.records_end > base:
            raise overlapping_segment(self.directory, previous, end.records_end, base)

    def _open_segment(self, base_offset: int, create: bool, after_preamble: bool = False) -> None:
        """Open the segment at ``base_offset``; a new one is made whole with its preamble first
        (written and fsynced under a temporary name, then linked), so none exists without it."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        path = segment_path(self.directory, base_offset)
        if create:
            tmp = self.directory / f".{path.name}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, preamble(self._log_id, base_offset))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            finally:
                tmp.unlink()
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self._start = records_start(self.directory, base_offset, self._log_id, after_preamble)
        self._fd = os.open(path, os.O_RDWR)
        self._base = base_offset
        self._size = self._start
        self._next_offset = base_offset

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1
