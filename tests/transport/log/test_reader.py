"""The local log's reader: from any offset, following appends, a damaged record named and the
rest read, never a record of a batch still being written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.local_log import WRITER, payload
from transport.log import LocalLogReader, LocalLogWriter, LogRecord
from transport.log.segment import HEADER, segment_path


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
    data[HEADER.size + 2] ^= 0xFF  # flip a payload byte of offset 0
    segment.write_bytes(bytes(data))
    records = LocalLogReader(log_dir).read()
    assert [(r.offset, r.error is not None) for r in records] == [(0, True), (1, False), (2, False)]
    assert records[0].payload == bytes(data[:HEADER.size + len(payload(0))])
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
