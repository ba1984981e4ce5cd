"""The local log's writer: dense offsets, fsynced batches, torn tails never read as data and cut by
the next writer, several writers on one log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specmetrics.transport.log import LocalLogReader, LocalLogWriter, segment
from specmetrics.transport.log.segment import HEADER, list_segments, segment_path
from tests.support.local_log import WRITER, payload, read_all


def test_offsets_are_dense_across_batches_and_segments(log_dir: Path) -> None:
    writer = LocalLogWriter(log_dir, segment_bytes=2000)
    ranges = [writer.append([payload(o) for o in range(i * 5, i * 5 + 5)]) for i in range(40)]
    writer.close()
    assert ranges == [(i * 5, i * 5 + 4) for i in range(40)]
    assert len(list_segments(log_dir)) > 5
    records = read_all(log_dir)
    assert [o for o, _ in records] == list(range(200))
    assert all(p == payload(o) for o, p in records)


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


def test_two_writers_share_one_log(log_dir: Path) -> None:
    first, second = LocalLogWriter(log_dir, segment_bytes=3000), LocalLogWriter(log_dir, segment_bytes=3000)
    for i in range(30):
        (first if i % 3 else second).append([b"a" * 50, b"b" * 70])
    assert [o for o, _ in read_all(log_dir)] == list(range(60))


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


def test_a_writer_appends_after_the_records_of_a_segment_whose_preamble_is_damaged(log_dir: Path) -> None:
    """It finds where the records start as a reader does (right after the preamble's bytes), so the next
    offset follows the last record: a segment of one record, whose bytes past it would otherwise count
    as damaged records."""
    writer = LocalLogWriter(log_dir)
    writer.append([payload(0)])
    writer.close()
    segment = segment_path(log_dir, 0)
    data = bytearray(segment.read_bytes())
    data[20] ^= 0x01  # in the log's id
    segment.write_bytes(bytes(data))
    assert LocalLogWriter(log_dir).append([payload(1)]) == (1, 1)
    assert [(r.offset, r.payload, r.error) for r in LocalLogReader(log_dir).read()] == \
        [(0, payload(0), None), (1, payload(1), None)]
