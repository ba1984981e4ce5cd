"""The local log's reader: from any offset, following appends, a damaged record named and the
rest read, never a record of a batch still being written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specmetrics.transport.log import LocalLogReader, LocalLogWriter, LogRecord
from specmetrics.transport.log.segment import (
    HEADER,
    PREAMBLE,
    SegmentIdentity,
    list_segments,
    read_identity,
    segment_path,
)
from tests.support.local_log import WRITER, payload


def test_reader_starts_at_any_offset_and_follows_appends(log_dir: Path) -> None:
    writer = LocalLogWriter(log_dir, segment_bytes=1500)
    writer.append([payload(o) for o in range(50)])
    reader = LocalLogReader(log_dir, 33)
    assert [r.offset for r in reader.read(5)] == [33, 34, 35, 36, 37]
    assert [r.offset for r in reader.read(100)] == list(range(38, 50))
    assert reader.read(100) == []
    writer.append([payload(50), payload(51)])
    assert [r.payload for r in reader.read(100)] == [payload(50), payload(51)]


def test_a_corrupt_record_in_the_middle_is_a_damaged_record_and_the_rest_is_read(log_dir: Path) -> None:
    writer = LocalLogWriter(log_dir)
    writer.append([payload(o) for o in range(3)])
    segment = segment_path(log_dir, 0)
    data = bytearray(segment.read_bytes())
    data[PREAMBLE.size + HEADER.size + 2] ^= 0xFF  # flip a payload byte of offset 0
    segment.write_bytes(bytes(data))
    records = LocalLogReader(log_dir).read()
    assert [(r.offset, r.error is not None) for r in records] == [(0, True), (1, False), (2, False)]
    assert records[0].payload == bytes(data[PREAMBLE.size:PREAMBLE.size + HEADER.size + len(payload(0))])
    assert [r.payload for r in records[1:]] == [payload(1), payload(2)]
    assert writer.append([payload(3)]) == (3, 3)


def test_a_reader_following_a_busy_writer_sees_no_damage(log_dir: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(log_dir)], stdout=subprocess.DEVNULL, cwd=root,
                            env={**os.environ, "PYTHONPATH": str(root)})
    try:
        reader = LocalLogReader(log_dir)
        records: list[LogRecord] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            records += reader.read(50)  # small reads: many of them end inside a batch being written
    finally:
        proc.kill()
        proc.wait()
    assert len(records) > 1000
    assert [r.offset for r in records] == list(range(len(records)))
    assert all(r.error is None and r.payload == payload(r.offset) for r in records)


def test_a_log_from_before_segment_preambles_reads_and_its_next_segments_get_them(
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Segments written before preambles existed start with a record: they read as before, a writer
    appends to the last of them, and the segments it then starts carry the log's identity. A damaged
    preamble is named in the log and skipped: every record is read."""
    writer = LocalLogWriter(log_dir, segment_bytes=1500)
    writer.append([payload(o) for o in range(30)])
    writer.close()
    old = list_segments(log_dir)
    for base in old:
        path = segment_path(log_dir, base)
        path.write_bytes(path.read_bytes()[PREAMBLE.size:])
    writer = LocalLogWriter(log_dir, segment_bytes=1500)
    writer.append([payload(o) for o in range(30, 60)])
    assert [read_identity(segment_path(log_dir, base)) for base in old] == [None] * len(old)
    new = [base for base in list_segments(log_dir) if base not in old]
    log = (log_dir / "log.id").read_text().strip()
    assert new and [read_identity(segment_path(log_dir, base)) for base in new] == \
        [SegmentIdentity(log, base) for base in new]
    assert [(r.offset, r.payload, r.error) for r in LocalLogReader(log_dir).read()] == \
        [(o, payload(o), None) for o in range(60)]
    damaged = segment_path(log_dir, new[0])
    data = bytearray(damaged.read_bytes())
    data[20] ^= 0x01  # in the log's id
    damaged.write_bytes(bytes(data))
    assert [(r.offset, r.error) for r in LocalLogReader(log_dir).read()] == [(o, None) for o in range(60)]
    assert f"{damaged} bytes 0-{PREAMBLE.size - 1} are a damaged segment preamble" in caplog.text
