"""Reading the local log from any offset, following it while writers append."""

from __future__ import annotations

import logging
from pathlib import Path

from emitter.log.segment import (
    HEADER,
    MAX_RECORD_BYTES,
    LogRecord,
    list_segments,
    parse,
    scan_valid_end,
    segment_path,
)

logger = logging.getLogger(__name__)
_CHUNK = 1024 * 1024


class LocalLogReader:
    """Sequential reader. ``read`` returns complete records only: an incomplete or torn tail
    ends the read and is looked at again next time (a live writer may still finish it)."""

    def __init__(self, directory: Path | str, start_offset: int = 0) -> None:
        self.directory = Path(directory)
        self._segment = -1
        self._position = 0
        self._offset = start_offset
        self._seeked = False

    @property
    def next_offset(self) -> int:
        return self._offset

    def read(self, max_records: int = 10_000, max_bytes: int = 16 * 1024 * 1024) -> list[LogRecord]:
        """Up to ``max_records`` records (and about ``max_bytes``) from the current offset."""
        if not self._seeked and not self._seek():
            return []
        records: list[LogRecord] = []
        size = 0
        while len(records) < max_records and size < max_bytes:
            data = self._read_chunk(_CHUNK)
            position = 0
            while len(records) < max_records and size < max_bytes:
                record, after = parse(data, position, self._offset)
                if record is None:
                    break
                records.append(record)
                size += len(record.payload)
                position = after
                self._offset += 1
            self._position += position
            if position == 0 and not self._next_segment():
                break
        return records

    def _read_chunk(self, size: int) -> bytes:
        """Bytes from the current position: ``size`` of them, or the whole next record if larger."""
        with segment_path(self.directory, self._segment).open("rb") as f:
            f.seek(self._position)
            data = f.read(size)
            if len(data) >= HEADER.size:
                needed = HEADER.size + HEADER.unpack_from(data)[0]
                if len(data) < needed <= MAX_RECORD_BYTES + HEADER.size:
                    data += f.read(needed - len(data))
        return data

    def _seek(self) -> bool:
        segments = list_segments(self.directory)
        candidates = [base for base in segments if base <= self._offset]
        if not candidates:
            if segments and segments[0] > self._offset:
                raise ValueError(f"offset {self._offset} is older than the log's first offset {segments[0]}")
            return False
        self._segment = candidates[-1]
        self._position, found = 0, self._segment
        if found < self._offset:
            path = segment_path(self.directory, self._segment)
            self._position, found = _position_of(path, self._segment, self._offset)
            if found < self._offset:
                raise ValueError(f"offset {self._offset} is beyond the end of the log ({found})")
        self._seeked = True
        return True

    def _next_segment(self) -> bool:
        """Move on when the current segment is complete and a newer one exists."""
        later = [base for base in list_segments(self.directory) if base > self._segment]
        if not later:
            return False
        if later[0] != self._offset:
            valid_end, _ = scan_valid_end(segment_path(self.directory, self._segment), self._segment)
            logger.warning(
                "segment %s ends with a torn record at byte %d; continuing at offset %d",
                self._segment, valid_end, later[0],
            )
            self._offset = later[0]
        self._segment, self._position = later[0], 0
        return True


def _position_of(path: Path, base_offset: int, offset: int) -> tuple[int, int]:
    """Byte position of ``offset`` in a segment, scanning from its start; stops at its end."""
    data = path.read_bytes()
    position, current = 0, base_offset
    while current < offset:
        record, after = parse(data, position, current)
        if record is None:
            break
        position, current = after, current + 1
    return position, current
