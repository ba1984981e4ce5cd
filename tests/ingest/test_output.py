"""The output tree's file handling (real files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.output import WrittenFile, remove_written
from ingest.partition_lock import PartitionLocks
from storage.durable import write_atomically


def test_a_refused_flush_removes_its_files_but_not_what_a_new_owner_wrote_since(tmp_path: Path) -> None:
    ours, rewritten, gone = (tmp_path / name for name in ("a.parquet", "b.parquet", "c.parquet"))
    for path in (ours, rewritten, gone):
        write_atomically(path, b"evicted ingester")
    written = [WrittenFile.of(tmp_path, path) for path in (ours, rewritten, gone)]
    write_atomically(rewritten, b"new owner")  # the same name, renamed into place by the partition's new owner
    gone.unlink()  # removed since: its flush was incomplete when the new owner took the partition
    assert remove_written(written) == ["a.parquet"]
    assert not ours.exists() and rewritten.read_bytes() == b"new owner"


def test_a_partition_lock_held_by_another_writer_is_waited_for_then_named(tmp_path: Path) -> None:
    holder, waiter = PartitionLocks(tmp_path, "steps"), PartitionLocks(tmp_path, "steps", wait_s=0.3)
    holder.acquire(1)
    waiter.acquire(0)  # another partition: no wait
    with pytest.raises(TimeoutError, match=rf"partition 1 of steps is being written by another ingester \(pid "
                                           rf"{os.getpid()}, holding {tmp_path}/steps-1\.lock\) for more than 0.3 s"):
        waiter.acquire(1)
    holder.release(1)
    waiter.acquire(1)
    waiter.release_all()
