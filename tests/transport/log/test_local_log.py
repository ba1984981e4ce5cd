"""The embedded local log: dense offsets, fsynced batches, torn tails never read as data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from transport.log import LocalLogReader, LocalLogWriter, LogRecord, segment
from transport.log.segment import HEADER, list_segments, segment_path


def payload(offset: int) -> bytes:
    """A payload whose content says which offset it must be at."""
    return f"record-{offset}-".encode() * (1 + offset % 7)


def read_all(log_dir: Path, start: int = 0) -> list[tuple[int, bytes]]:
    reader = LocalLogReader(log_dir, start)
    out: list[tuple[int, bytes]] = []
    while batch := reader.read(1000):
        out += [(r.offset, r.payload) for r in batch]
    return out


def test_offsets_are_dense_across_batches_and_segments(log_dir: Path) -> None:
    writer = LocalLogWriter(log_dir, segment_bytes=2000)
    ranges = [writer.append([payload(o) for o in range(i * 5, i * 5 + 5)]) for i in range(40)]
    writer.close()
    assert ranges == [(i * 5, i * 5 + 4) for i in range(40)]
    assert len(list_segments(log_dir)) > 5
    records = read_all(log_dir)
    assert [o for o, _ in records] == list(range(200))
    assert all(p == payload(o) for o, p in records)


def test_reader_starts_at_any_offset_and_follows_appends(log_dir: Path) -> None:
    writer = LocalLogWriter(log_dir, segment_bytes=1500)
    writer.append([payload(o) for o in range(50)])
    reader = LocalLogReader(log_dir, 33)
    assert [r.offset for r in reader.read(5)] == [33, 34, 35, 36, 37]
    assert [r.offset for r in reader.read(100)] == list(range(38, 50))
    assert reader.read(100) == []
    writer.append([payload(50), payload(51)])
    assert [r.payload for r in reader.read(100)] == [payload(50), payload(51)]


def test_a_torn_tail_is_never_parsed_and_the_next_writer_cuts_it(log_dir: Path) -> None:
    writer = LocalLogWriter(log_dir)
    writer.append([payload(o) for o in range(10)])
    writer.close()
    segment = segment_path(log_dir, 0)
    whole = segment.stat().st_size
    # A record of the next batch that only half reached the disk: header plus part of the payload.
    torn = HEADER.pack(1000, 0, 10) + b"x" * 400
    with segment.open("ab") as f:
        f.write(torn)
    assert [o for o, _ in read_all(log_dir)] == list(range(10))
    writer = LocalLogWriter(log_dir)
    assert writer.append([payload(10)]) == (10, 10)
    assert segment.stat().st_size == whole + HEADER.size + len(payload(10))
    assert [o for o, _ in read_all(log_dir)] == list(range(11))


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


def test_two_writers_share_one_log(log_dir: Path) -> None:
    first, second = LocalLogWriter(log_dir, segment_bytes=3000), LocalLogWriter(log_dir, segment_bytes=3000)
    for i in range(30):
        (first if i % 3 else second).append([b"a" * 50, b"b" * 70])
    assert [o for o, _ in read_all(log_dir)] == list(range(60))


WRITER = """
import sys
from transport.log import LocalLogWriter
from tests.transport.log.test_local_log import payload
writer = LocalLogWriter(sys.argv[1], segment_bytes=256 * 1024)
offset = 0
while True:
    first, last = writer.append([payload(o) for o in range(offset, offset + 200)])
    print(last, flush=True)
    offset = last + 1
"""


@pytest.mark.parametrize("kill_after_batches", [3, 17, 41])
def test_writer_killed_mid_batch_loses_no_committed_record(log_dir: Path, kill_after_batches: int) -> None:
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(log_dir)], stdout=subprocess.PIPE, text=True,
                            cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.stdout is not None
    committed = -1
    for _ in range(kill_after_batches):
        committed = int(proc.stdout.readline())
    time.sleep(0.001 * kill_after_batches)  # land somewhere inside a later batch
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    records = read_all(log_dir)
    offsets = [o for o, _ in records]
    assert offsets == list(range(len(offsets)))
    assert len(offsets) >= committed + 1  # every batch whose append returned is there
    assert all(p == payload(o) for o, p in records)
    writer = LocalLogWriter(log_dir)
    assert writer.append([b"after"]) == (len(offsets), len(offsets))
    assert read_all(log_dir, len(offsets)) == [(len(offsets), b"after")]


def test_a_batch_that_does_not_fit_on_the_disk_is_not_appended_at_all(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], check=True)
    try:
        writer = LocalLogWriter(disk / "log")
        assert writer.append([payload(0), payload(1)]) == (0, 1)
        with pytest.raises(OSError, match="No space left on device"):
            writer.append([b"x" * 3000 for _ in range(10)])
        assert [o for o, _ in read_all(disk / "log")] == [0, 1]
        assert writer.append([payload(2)]) == (2, 2)
        writer.close()
        assert [o for o, _ in read_all(disk / "log")] == [0, 1, 2]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_writer_catching_up_reads_only_what_the_others_appended(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = LocalLogWriter(tmp_path), LocalLogWriter(tmp_path)
    a.append([b"a"] * 1000)
    b.append([b"b"] * 3)  # b sees a's records for the first time: it reads them all
    parsed: list[int] = []
    real_parse = segment.parse

    def counting_parse(buffer: bytes | memoryview, position: int, expected_offset: int) -> Any:
        parsed.append(expected_offset)
        return real_parse(buffer, position, expected_offset)

    monkeypatch.setattr(segment, "parse", counting_parse)
    assert a.append([b"a"]) == (1003, 1003)
    assert parsed == [1000, 1001, 1002, 1003]  # b's three records and the end, not a's thousand


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
