"""Record framing of the embedded local log.

A log is a directory of segment files named ``<base offset, 20 digits>.log``. A segment is a
sequence of records, each a 16-byte header ``<length u32><crc32 u32><offset u64>`` and then
``length`` payload bytes. The CRC covers the offset and the payload, so a record is data only
when all of it reached the disk: a writer killed mid-write leaves a torn tail that fails the
check and is never parsed as data.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

HEADER = struct.Struct("<IIQ")
MAX_RECORD_BYTES = 64 * 1024 * 1024
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


class LogRecord(NamedTuple):
    """One record of the log."""

    offset: int
    payload: bytes


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
    bytes there are incomplete, corrupt or not the expected offset (a torn or unwritten tail)."""
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


def scan_valid_end(path: Path, base_offset: int, known: tuple[int, int] = (0, -1)) -> tuple[int, int]:
    """``(valid bytes, next offset)`` of a segment: where the last complete record ends. ``known``
    is a ``(valid bytes, next offset)`` already checked, to scan only what follows it."""
    start, offset = known if known[1] >= 0 else (0, base_offset)
    with path.open("rb") as file:
        if start:
            file.seek(start)
        data = file.read()
    position = 0
    while True:
        record, position_after = parse(data, position, offset)
        if record is None:
            return start + position, offset
        position, offset = position_after, offset + 1
