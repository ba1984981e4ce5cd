"""Record framing of the embedded local log.

A log is a directory of segment files named ``<base offset, 20 digits>.log``. A segment is a
sequence of records, each a 16-byte header ``<length u32><crc32 u32><offset u64>`` and then
``length`` payload bytes. The CRC covers the offset and the payload, so a record is data only
when all of it reached the disk.

Damage is told apart by its shape. A writer killed mid-append leaves a prefix of its batch: at
worst one frame cut short (its header or payload ends with the file); a machine that lost power
before the batch's fsync may leave the file longer, the new bytes zeros. Either is a *torn tail*,
and only the last segment can have one; it was never acknowledged, so it is not data. Anything else
that is not a record (a complete frame whose CRC or offset is wrong, a header whose length is
impossible, a frame cut short with records after it, or cut short at the end of a segment that
is not the last) is *corruption*: the records after it are found again by their framing
(:func:`find_next_record`), and the offsets in between are accounted for as damaged records.
Damaged bytes at the end of a segment, with nothing valid after them, count as the records
their intact headers chain into, or else as many as they have room for (:func:`damaged_records`):
an offset may be counted damaged that never held a record, but none is given twice. The one case
that cannot be told apart: the last record of the log with a length field damaged to claim more
bytes than the file holds looks torn, and is cut off.

A segment a writer creates starts with a :data:`PREAMBLE`: its log's id and its base offset, checked
whenever the segment is opened (:func:`records_start`), so that a segment of another log, or one
moved within its log, is refused instead of read as this log's records. Segments written before
preambles existed start with a record and read as before; once a log has a segment with a preamble,
a later one without it is refused.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

logger = logging.getLogger(__name__)

HEADER = struct.Struct("<IIQ")
#: ``<magic><log id, 32 ASCII bytes><base offset u64><crc32 u32>``: the CRC covers the rest. No
#: record starts with the magic: read as a header, its length field is over :data:`MAX_RECORD_BYTES`.
PREAMBLE = struct.Struct("<8s32sQI")
_MAGIC = b"SMLOGSEG"
MAX_RECORD_BYTES = 64 * 1024 * 1024
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_FIRST_WINDOW = 64 * 1024  # resynchronising: most damage is one record, so look close first
_MAX_WINDOW = 16 * 1024 * 1024


class LogRecord(NamedTuple):
    """One record of the log. A damaged one has ``error`` set (why, and where) and its bytes as
    ``payload`` (empty for the further offsets of one damaged region: the first carries them)."""

    offset: int
    payload: bytes
    error: str | None = None


class LogCorrupted(ValueError):
    """The log's segments do not fit together (a segment's base offset below the end of the one
    before it): reading or appending would give two records one offset."""


def overlapping_segment(directory: Path, previous: int, previous_end: int, base: int) -> LogCorrupted:
    """The error for a segment whose base is below the end (``previous_end``) of the one before it."""
    return LogCorrupted(f"local log segment {segment_path(directory, base)} starts at offset {base}, below the end "
                        f"of {segment_path(directory, previous)} (offset {previous_end}): two records would share "
                        "offsets; move the segment that does not belong out of the log")


class SegmentEnd(NamedTuple):
    """Where a segment's records end: ``size`` bytes hold them (and any damaged bytes among or
    after them), and ``next_offset`` is the offset the next record gets. ``torn``: the bytes past
    ``size`` are a torn tail. ``records_end``: the offset after the last valid record (below
    ``next_offset`` when the segment ends in damaged bytes)."""

    size: int
    next_offset: int
    records_end: int
    torn: bool = False


class SegmentIdentity(NamedTuple):
    """What a segment's preamble says: the log it was written for, and its base offset there."""

    log_id: str
    base_offset: int


def identity_field(log_id: str) -> str:
    """The 32 characters a preamble holds for ``log_id``: the id itself (a writer's ids are 32 hex
    digits), or a digest of an id someone wrote by hand."""
    if len(log_id) == 32 and log_id.isascii():
        return log_id
    return hashlib.blake2b(log_id.encode(), digest_size=16).hexdigest()


def preamble(log_id: str, base_offset: int) -> bytes:
    """The first bytes of a new segment of the log ``log_id`` at ``base_offset``."""
    head = PREAMBLE.pack(_MAGIC, identity_field(log_id).encode(), base_offset, 0)[:-4]
    return head + zlib.crc32(head).to_bytes(4, "little")


def read_identity(path: Path) -> SegmentIdentity | None:
    """The identity in the segment's valid preamble, or None."""
    with path.open("rb") as file:
        head = file.read(PREAMBLE.size)
    if len(head) < PREAMBLE.size or not head.startswith(_MAGIC) or \
            zlib.crc32(head[:-4]) != int.from_bytes(head[-4:], "little"):
        return None
    _, log_id, base_offset, _ = PREAMBLE.unpack(head)
    return SegmentIdentity(log_id.decode("ascii", "replace"), base_offset)


def records_start(directory: Path, base_offset: int, log_id: str | None, after_preamble: bool) -> int:
    """Where the records of the segment at ``base_offset`` start: after its preamble, if it has one.

    Refuses (:class:`LogCorrupted`) a segment whose preamble names another log than ``log_id`` (the
    log's own, when it has one) or another base offset, and one that starts with a record when the
    segment before it had a preamble (``after_preamble``): no writer makes such a log. A damaged
    preamble (a valid first record after it) is logged and skipped: the records' own CRCs and offsets
    still hold."""
    path = segment_path(directory, base_offset)
    identity = read_identity(path)
    if identity is None:
        if _has_damaged_preamble(path, base_offset):
            logger.warning("%s bytes 0-%d are a damaged segment preamble: which log the segment belongs to is not "
                           "checked; its records are read", path, PREAMBLE.size - 1)
            return PREAMBLE.size
        if after_preamble and _starts_with_record(path, base_offset):
            raise LogCorrupted(f"local log segment {path} has no preamble, but the segment before it has one: it "
                               f"is not a segment of {directory} (a writer of this log gives each new segment "
                               "one); move it out of the log, or put the log's own segment back")
        return 0
    expected = identity_field(log_id) if log_id is not None else identity.log_id
    if (identity.log_id, identity.base_offset) != (expected, base_offset):
        raise LogCorrupted(f"local log segment {path} was written for the log {identity.log_id} at offset "
                           f"{identity.base_offset}, but it lies in {directory} (log {expected}) at offset "
                           f"{base_offset}: a segment of another log, or moved within this one (a bad restore "
                           "or copy?); nothing of it is read. Move it out of the log and put the log's own "
                           "segment back")
    return PREAMBLE.size


def _has_damaged_preamble(path: Path, base_offset: int) -> bool:
    """No valid preamble (checked first), no record at the start, and the first record right where a
    preamble ends: a preamble whose bytes were damaged."""
    return not _starts_with_record(path, base_offset) and _starts_with_record(path, base_offset, PREAMBLE.size)


def _starts_with_record(path: Path, offset: int, position: int = 0) -> bool:
    with path.open("rb") as file:
        file.seek(position)
        head = file.read(HEADER.size)
        if len(head) < HEADER.size:
            return False
        return parse(head + file.read(min(HEADER.unpack(head)[0], MAX_RECORD_BYTES)), 0, offset)[0] is not None


def segment_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}.log"


def list_segments(directory: Path) -> list[int]:
    """Base offsets of the segments in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for name in names if (m := _SEGMENT_NAME.match(name)))


def frame(offset: int, payload: bytes) -> bytes:
    """The bytes of one record."""
    if len(payload) > MAX_RECORD_BYTES:
        raise ValueError(f"record of {len(payload)} bytes exceeds the {MAX_RECORD_BYTES}-byte limit")
    crc = zlib.crc32(payload, zlib.crc32(offset.to_bytes(8, "little")))
    return HEADER.pack(len(payload), crc, offset) + payload


def parse(buffer: bytes | memoryview, position: int, expected_offset: int) -> tuple[LogRecord | None, int]:
    """The record at ``position`` and the position after it, or ``(None, position)`` when the
    bytes there are not a whole, valid record with the expected offset."""
    end_of_header = position + HEADER.size
    if end_of_header > len(buffer):
        return None, position
    length, crc, offset = HEADER.unpack_from(buffer, position)
    end = end_of_header + length
    if offset != expected_offset or length > MAX_RECORD_BYTES or end > len(buffer):
        return None, position
    payload = bytes(buffer[end_of_header:end])
    if zlib.crc32(payload, zlib.crc32(offset.to_bytes(8, "little"))) != crc:
        return None, position
    return LogRecord(offset, payload), end


def records_end(buffer: bytes | memoryview, position: int, offset: int, stop_at: int | None = None) -> tuple[int, int]:
    """``(position, offset)`` after the valid records that follow each other from ``position``
    (at most up to offset ``stop_at``)."""
    while offset != stop_at:
        record, after = parse(buffer, position, offset)
        if record is None:
            break
        position, offset = after, offset + 1
    return position, offset


def is_torn(buffer: bytes, position: int) -> bool:
    """Whether the bytes from ``position`` to the end are what an append that never finished leaves:
    one frame cut short (too few bytes for a header, or fewer than the header's possible length
    says), or zeros only (the file grew, its data never reached the disk)."""
    remaining = len(buffer) - position
    if remaining < HEADER.size:
        return True
    length: int = HEADER.unpack_from(buffer, position)[0]
    if length <= MAX_RECORD_BYTES and HEADER.size + length > remaining:
        return True
    return not buffer[position:].strip(b"\0")


def find_next_record(buffer: bytes, start: int, offset: int) -> tuple[int, int] | None:
    """``(position, offset)`` of the first valid record past a damaged record at ``start`` whose
    offset is ``offset``, or None.

    The record found has a larger offset, by at most one per 16 bytes (a header) past ``start``:
    every record it skips took at least that. Candidates are found vectorised: the offset fields
    at all positions of one alignment mod 8 are one zero-copy ``uint64`` view, so the scan runs
    in C at memory speed, in windows that start small (most damage is one record).
    """
    first_candidate, window = start + 1, _FIRST_WINDOW
    last_candidate = len(buffer) - HEADER.size  # a header must fit
    while first_candidate <= last_candidate:
        end = min(last_candidate + 1, first_candidate + window)
        for position in _candidates(buffer, first_candidate, end, offset + 1, offset + (end - start) // HEADER.size):
            found = HEADER.unpack_from(buffer, position)[2]
            if found <= offset + (position - start) // HEADER.size:
                record, _ = parse(buffer, position, found)
                if record is not None:
                    return position, found
        first_candidate, window = end, min(window * 4, _MAX_WINDOW)
    return None


def _candidates(buffer: bytes, first: int, end: int, lowest: int, highest: int) -> list[int]:
    """Positions in ``[first, end)`` whose offset field holds an offset from ``lowest`` to
    ``highest``, ascending."""
    found: list[int] = []
    if highest < lowest:
        return found
    for alignment in range(8):
        count = (end - first - alignment + 7) // 8
        if count > 0:
            offsets = np.frombuffer(buffer, dtype="<u8", count=count, offset=first + alignment + 8)
            hits = np.flatnonzero(offsets - np.uint64(lowest) <= np.uint64(highest - lowest))
            found += (first + alignment + 8 * hits).tolist()
    return sorted(found)


def damaged_records(damaged: bytes | memoryview, offset: int) -> int:
    """How many records damaged bytes at the end of a segment count as, from ``offset`` on: the
    frames their headers chain into when those are intact up to the end (a record whose payload
    or CRC is damaged is one), or else one per header's worth of bytes (the most they can have held)."""
    position, count = 0, 0
    while position + HEADER.size <= len(damaged):
        length, _, found = HEADER.unpack_from(damaged, position)
        if found != offset + count or length > MAX_RECORD_BYTES:
            break
        position, count = position + HEADER.size + length, count + 1
    if position == len(damaged) and count:
        return count
    return max(1, len(damaged) // HEADER.size)


def scan_segment(path: Path, base_offset: int, known: tuple[int, int] = (0, -1)) -> SegmentEnd:
    """Where a segment's records end, resynchronising past damaged bytes as a reader does, so
    that a writer appends after everything a reader counts. ``known`` is a ``(valid bytes, next
    offset)`` already checked, to scan only what follows it."""
    start, offset = known if known[1] >= 0 else (0, base_offset)
    with path.open("rb") as file:
        if start:
            file.seek(start)
        data = file.read()
    position = 0 if known[1] >= 0 else \
        PREAMBLE.size if read_identity(path) is not None or _has_damaged_preamble(path, base_offset) else 0
    while True:
        position, offset = records_end(data, position, offset)
        if position == len(data):
            return SegmentEnd(start + position, offset, offset)
        found = find_next_record(data, position, offset)
        if found is not None:
            position, offset = found
        elif is_torn(data, position):
            return SegmentEnd(start + position, offset, offset, torn=True)
        else:
            return SegmentEnd(start + len(data), offset + damaged_records(data[position:], offset), offset)
