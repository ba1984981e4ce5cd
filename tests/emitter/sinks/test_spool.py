"""The spool: an ordered, bounded, durable FIFO of keyed messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from emitter.sinks.spool import Spool, SpoolFull, SpoolInUse


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
