"""The partition locks of an output (real files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specmetrics.ingest.partition_lock import PartitionLocks


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
