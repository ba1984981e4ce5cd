"""The spool: an ordered, bounded, durable FIFO of keyed messages."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from specmetrics.emitter.sinks import spool as spool_module
from specmetrics.emitter.sinks.spool import Spool, SpoolFull, SpoolInUse
from specmetrics.transport.log.segment import list_segments


def test_messages_come_back_in_order_with_their_keys_across_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.append([(b"engine-a", b"m0"), (b"engine-b", b"m1")])
    spool.append([(b"", b"m2")])
    assert spool.peek(2) == [(b"engine-a", b"m0"), (b"engine-b", b"m1")]
    spool.acknowledge(1)
    spool.close()
    reopened = Spool(tmp_path, 1 << 20)
    assert reopened.pending == 2
    assert reopened.peek(10) == [(b"engine-b", b"m1"), (b"", b"m2")]
    reopened.acknowledge(2)
    assert (reopened.pending, reopened.size_bytes, reopened.peek(10)) == (0, 0, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == [".owner"]  # emptied, not just marked
    reopened.append([(b"k", b"after")])
    assert reopened.peek(10) == [(b"k", b"after")]


def test_a_full_spool_refuses_the_whole_batch(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 2048)
    spool.append([(b"k", b"x" * 1000)])
    with pytest.raises(SpoolFull, match="is full"):
        spool.append([(b"k", b"y" * 100), (b"k", b"z" * 1000)])
    assert spool.peek(10) == [(b"k", b"x" * 1000)]


def test_one_process_owns_a_spool(tmp_path: Path) -> None:
    Spool(tmp_path, 1 << 20)
    with pytest.raises(SpoolInUse):
        Spool(tmp_path, 1 << 20)  # the flock is per open file description, so this models a second process


def test_a_full_disk_keeps_the_position_in_memory_and_frees_replayed_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(tmp_path, 1 << 20, segment_bytes=1024)
    for batch in range(10):  # about 1.2 KB per batch: one 1 KB segment each
        spool.append([(b"k", b"%04d" % i + bytes(100)) for i in range(batch * 10, batch * 10 + 10)])
    assert len(list_segments(tmp_path)) == 10
    size = spool.size_bytes

    def disk_full(path: Path, data: bytes) -> None:  # writing the position file hits a full disk
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(spool_module, "write_atomically", disk_full)
    spool.acknowledge(25)
    assert spool.pending == 75 and spool.peek(1)[0][1][:4] == b"0025"
    assert list_segments(tmp_path)[0] == 20  # the segments of 0-19 are replayed: deleted
    assert spool.size_bytes < size
    spool.acknowledge(10)
    assert spool.peek(1)[0][1][:4] == b"0035" and list_segments(tmp_path)[0] == 30
    assert caplog.text.count("cannot record the replay position") == 1
    spool.close()
    reopened = Spool(tmp_path, 1 << 20, segment_bytes=1024)  # a restart: the position file was never written
    assert reopened.pending == 70 and reopened.peek(1)[0][1][:4] == b"0030"  # 30-34 are sent again, not lost
    reopened.acknowledge(70)
    assert reopened.pending == 0 and sorted(p.name for p in tmp_path.iterdir()) == [".owner"]
