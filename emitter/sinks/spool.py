"""A bounded on-disk FIFO of keyed messages: where the Kafka sink parks what the broker did
not take, in order, until it can be replayed.

It is a local log (fsynced batches) plus a ``position`` file (the next offset to replay).
Segments are deleted as soon as they are replayed, and the log is emptied when everything
is. It survives a restart of the process: a sink opened on the same folder replays what an
earlier process left. When the position cannot be written (a full disk), replaying goes on
from the position kept in memory; a restart before it is written again sends the messages
replayed since once more (delivery is at least once).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import struct
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

from specmetrics.storage.durable import write_atomically
from specmetrics.transport.log import LocalLogReader, LocalLogWriter
from specmetrics.transport.log.segment import list_segments, segment_path

logger = logging.getLogger("vllm.specmetrics")
_KEY_LENGTH = struct.Struct("<H")
SEGMENT_BYTES = 16 * 1024 * 1024  # a replayed segment is deleted: small ones free a full disk sooner


class SpoolFull(Exception):
    """The spool reached its size limit."""


class SpoolInUse(Exception):
    """Another process owns this spool folder."""


class Spool:
    def __init__(self, directory: Path, max_bytes: int, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._segment_bytes = segment_bytes
        directory.mkdir(parents=True, exist_ok=True)
        self._owner_fd = os.open(directory / ".owner", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._owner_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._owner_fd)
            raise SpoolInUse(f"spool {directory} is in use by another process") from None
        self._position_file = directory / "position"
        self._writer: LocalLogWriter | None = None
        self._position = int(self._position_file.read_text()) if self._position_file.exists() else 0
        segments = list_segments(directory)
        if segments:  # only replayed segments are deleted: an older position was not written (full disk)
            self._position = max(self._position, segments[0])
        self._position_saved = True
        self._end = self._scan_end()
        self._bytes = sum(segment_path(directory, b).stat().st_size for b in segments)

    @property
    def pending(self) -> int:
        """Messages spooled and not yet acknowledged."""
        return self._end - self._position

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def append(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        """Durably append ``(key, value)`` pairs in order; all or none. Raises :class:`SpoolFull`."""
        if not items:
            return
        records = [_KEY_LENGTH.pack(len(key)) + key + value for key, value in items]
        size = sum(len(r) for r in records)
        if self._bytes + size > self.max_bytes:
            raise SpoolFull(f"spool {self.directory} is full ({self._bytes:,} of {self.max_bytes:,} bytes)")
        if self._writer is None:
            self._writer = LocalLogWriter(self.directory, self._segment_bytes)
        self._writer.append(records)
        self._bytes += size + 16 * len(records)
        self._end = self._writer.next_offset

    def peek(self, max_messages: int) -> list[tuple[bytes, bytes]]:
        """The oldest pending ``(key, value)`` pairs, at most ``max_messages``."""
        if not self.pending:
            return []
        records = LocalLogReader(self.directory, self._position).read(min(max_messages, self.pending))
        items = []
        for record in records:
            if record.error is not None:  # damaged on disk: its bytes go on unkeyed, to end as a dead letter
                logger.warning("specmetrics: %s", record.error)
                items.append((b"", record.payload))
                continue
            (length,) = _KEY_LENGTH.unpack_from(record.payload)
            items.append((record.payload[2:2 + length], record.payload[2 + length:]))
        return items

    def acknowledge(self, count: int) -> None:
        """The oldest ``count`` pending messages are delivered; deletes the segments that are
        all delivered, and empties the spool when everything is. A position that cannot be
        written (a full disk) is kept in memory: it never stops the replay."""
        self._position += count
        if self._position >= self._end:
            self._clear()
            return
        self._delete_replayed_segments()
        try:
            write_atomically(self._position_file, str(self._position).encode())
        except OSError as exc:
            if self._position_saved:
                logger.warning("specmetrics: cannot record the replay position in %s (%s); the replay goes on, and "
                               "a restart before it is recorded sends the messages replayed since again",
                               self.directory, exc)
            self._position_saved = False
        else:
            self._position_saved = True

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        os.close(self._owner_fd)

    def _delete_replayed_segments(self) -> None:
        segments = list_segments(self.directory)
        for base, following in pairwise(segments):
            if following > self._position:
                break
            path = segment_path(self.directory, base)
            size = path.stat().st_size
            path.unlink()
            self._bytes -= size

    def _clear(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for entry in self.directory.iterdir():
            if entry.name != ".owner":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        self._position = self._end = self._bytes = 0
        self._position_saved = True

    def _scan_end(self) -> int:
        """The offset after the last complete record (a torn tail from a crash is ignored)."""
        segments = list_segments(self.directory)
        if not segments:
            return 0
        reader = LocalLogReader(self.directory, segments[-1])
        end = segments[-1]
        while records := reader.read(100_000, 64 * 1024 * 1024):
            end = records[-1].offset + 1
        return max(end, self._position)
