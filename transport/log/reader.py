"""Reading the local log from any offset, following it while writers append.

Damaged records come back as records with ``error`` set, and the records after them are read
(see :mod:`transport.log.segment`); offsets whose bytes are gone (a segment deleted or truncated,
a start older than the log's first segment) are reported as :class:`LogGap`\\ s.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from specmetrics.transport.log.directory import log_id, writers_idle
from specmetrics.transport.log.segment import (
    HEADER,
    MAX_RECORD_BYTES,
    LogCorrupted,
    LogRecord,
    damaged_records,
    find_next_record,
    is_torn,
    list_segments,
    overlapping_segment,
    parse,
    read_identity,
    records_end,
    records_start,
    scan_segment,
    segment_path,
)

logger = logging.getLogger(__name__)
_CHUNK = 1024 * 1024


class LogGap(NamedTuple):
    """Offsets ``first`` to ``last`` whose bytes are gone from the log; ``reason`` says where."""

    first: int
    last: int
    reason: str


class LocalLogReader:
    """Sequential reader. ``read`` returns complete records only: a torn tail ends the read and
    is looked at again next time (a live writer may still finish it); :attr:`torn_tail` then says
    where it is."""

    def __init__(self, directory: Path | str, start_offset: int = 0) -> None:
        self.directory = Path(directory)
        self._segment = -1
        self._position = 0
        self._offset = start_offset  # of the record at _position
        self._start = start_offset  # records below it are not returned (reading began before it)
        self._seeked = False
        self._gaps: list[LogGap] = []
        #: ``(segment, byte)`` of the torn tail the last :meth:`read` stopped at, if it did.
        self.torn_tail: tuple[Path, int] | None = None

    @property
    def next_offset(self) -> int:
        return max(self._offset, self._start)

    def read(self, max_records: int = 10_000, max_bytes: int = 16 * 1024 * 1024) -> list[LogRecord]:
        """Up to about ``max_records`` records (and ``max_bytes``) from the current offset. The gaps
        this crossed come before all of them (:meth:`take_gaps`)."""
        self.torn_tail = None
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
                if record.offset >= self._start:
                    records.append(record)
                    size += len(record.payload)
                position = after
                self._offset += 1
            self._position += position
            if position == 0 and not self._past_stop(records):
                break
        return records

    def take_gaps(self) -> list[LogGap]:
        """The gaps crossed since the last call, oldest first."""
        gaps, self._gaps = self._gaps, []
        return gaps

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

    def _past_stop(self, records: list[LogRecord]) -> bool:
        """No record at the current position: move past the end of the segment or past damaged
        bytes (adding them to ``records``). False when there is nothing more to read for now."""
        # Listed before the bytes are read: a segment with a later one beside it is complete.
        later = [base for base in list_segments(self.directory) if base > self._segment]
        path = segment_path(self.directory, self._segment)
        rest = _read_from(path, self._position)
        if not rest:
            return bool(later) and self._enter(later[0], records)
        if parse(rest, 0, self._offset)[0] is not None:  # a writer finished it since the chunk was read
            return True
        found = find_next_record(rest, 0, self._offset)
        if found is not None:
            self._damaged(records, path, rest[:found[0]], found[1] - self._offset)
            return True
        if later:
            return self._damaged_end(records, path, rest, later[0])
        if is_torn(rest, 0):
            self.torn_tail = (path, self._position)
            return False
        with writers_idle(self.directory) as idle:
            # A writer appending now may be writing past these bytes: only an idle log tells.
            if not idle:
                return False
            if list_segments(self.directory)[-1:] == [self._segment] and \
                    path.stat().st_size == self._position + len(rest):
                self._damaged(records, path, rest, damaged_records(rest, self._offset))  # as a writer counts them
            return True

    def _damaged(self, records: list[LogRecord], path: Path, damaged: bytes, count: int) -> None:
        """``count`` offsets lost in ``damaged`` bytes at the current position: damaged records
        (the first carries the bytes), and the position moves past them."""
        where = f"{path} bytes {self._position}-{self._position + len(damaged) - 1}"
        if count == 0:  # at the end of a segment, before the next one's base
            logger.warning("%s are not a record and hold no offset; skipped", where)
        first = self._offset
        reason = f"damaged local log record: {where} are not a valid record" + \
            (f" (offsets {first}-{first + count - 1} lost in them)" if count > 1 else "")
        records += [LogRecord(offset, damaged if offset == first else b"", reason)
                    for offset in range(max(first, self._start), first + count)]
        self._position += len(damaged)
        self._offset += count

    def _damaged_end(self, records: list[LogRecord], path: Path, rest: bytes, next_base: int) -> bool:
        """A segment that is not the last ends in damaged bytes: they hold offsets up to the next
        segment's base, as many as they count as (:func:`damaged_records`); the rest are a gap."""
        if next_base < self._offset:
            self._refuse_overlap(next_base)
        self._damaged(records, path, rest, min(damaged_records(rest, self._offset), next_base - self._offset))
        return self._enter(next_base, records)

    def _enter(self, base: int, records: list[LogRecord]) -> bool:
        """Move to the segment that starts at ``base``; a gap before it ends this read first."""
        if base < self._offset:
            self._refuse_overlap(base)
        if base > self._offset:
            if records:  # the gap is reported at the start of the next read, before its records
                return False
            current = segment_path(self.directory, self._segment)
            self._gap(self._offset, base - 1, f"no segment holds them: {current} ends before offset {self._offset} "
                                              f"and {segment_path(self.directory, base)} starts at {base} "
                                              "(a segment was deleted or truncated)")
        after_preamble = read_identity(segment_path(self.directory, self._segment)) is not None
        try:
            position = records_start(self.directory, base, log_id(self.directory), after_preamble)
        except LogCorrupted:
            if records:  # refused at the start of the next read, once these are handed over
                return False
            raise
        self._segment, self._position, self._offset = base, position, base
        return True

    def _refuse_overlap(self, base: int) -> None:
        raise overlapping_segment(self.directory, self._segment, self._offset, base)

    def _gap(self, first: int, last: int, reason: str) -> None:
        if last >= self._start:
            self._gaps.append(LogGap(max(first, self._start), last, reason))

    def _seek(self) -> bool:
        segments = list_segments(self.directory)
        if not segments:
            return False
        if segments[0] > self._offset:
            self._gap(self._offset, segments[0] - 1, f"the local log {self.directory} starts at offset "
                                                     f"{segments[0]}: older segments were removed")
            self._segment, self._offset = segments[0], segments[0]
            self._position = records_start(self.directory, self._segment, log_id(self.directory), False)
        else:
            index = max(i for i, base in enumerate(segments) if base <= self._offset)
            self._segment = segments[index]
            if index > 0:
                _check_follows(self.directory, segments[index - 1], self._segment)
            after_preamble = index > 0 and read_identity(segment_path(self.directory, segments[index - 1])) is not None
            start = records_start(self.directory, self._segment, log_id(self.directory), after_preamble)
            if self._start > self._segment:  # the records before the start are walked past
                data = segment_path(self.directory, self._segment).read_bytes()
                self._position, self._offset = records_end(data, start, self._segment, stop_at=self._start)
            else:  # reading starts at the segment's first record: none of it is read twice
                self._position, self._offset = start, self._segment
            if self._offset < self._start and index == len(segments) - 1:
                end = scan_segment(segment_path(self.directory, self._segment), self._segment).next_offset
                if end < self._start:
                    raise LogCorrupted(f"offset {self._start} is beyond the end of the local log {self.directory} "
                                       f"({end}): it lost records that were read, or is another log")
        self._seeked = True
        return True


def _check_follows(directory: Path, previous: int, base: int) -> None:
    """Refuse a segment whose base is below the end of the records of the one before it."""
    end = scan_segment(segment_path(directory, previous), previous)
    if end.records_end > base:
        raise overlapping_segment(directory, previous, end.records_end, base)


def _read_from(path: Path, position: int) -> bytes:
    with path.open("rb") as f:
        f.seek(position)
        return f.read()
