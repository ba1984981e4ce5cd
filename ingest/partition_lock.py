"""One writer at a time per source partition of an output tree.

An ingester holds ``_state/<source>-<partition>.lock`` (an ``flock``) while it writes a flush
of that partition and until its commit is made or refused (and the refused flush removed
again), and while it works out where the partition's stored files end
(:mod:`ingest.recovery`). So an ingester that was evicted from its Kafka group without knowing
it cannot slip a flush into the tree that a partition's new owner then counts as stored, only
to remove it again when its own commit is refused. The kernel drops the lock of a process that
dies; a holder that is stopped (SIGSTOP) keeps it, so a wait is bounded.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

#: How long to wait for another ingester's flush of the same partition before giving up.
LOCK_WAIT_S = 60.0
_RETRY_S = 0.02


class PartitionLocks:
    """The partition locks of one source in one output tree, as held by this process."""

    def __init__(self, state_dir: Path, source: str, wait_s: float = LOCK_WAIT_S) -> None:
        self._state_dir = state_dir
        self._source = source
        self._wait_s = wait_s
        self._held: dict[int, int] = {}  # partition -> locked file descriptor

    def acquire(self, partition: int) -> None:
        """Lock ``partition``, waiting up to ``wait_s`` for another process's flush of it."""
        if partition in self._held:
            return
        path = self._state_dir / f"{self._source}-{partition}.lock"
        self._state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self._wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise TimeoutError(f"partition {partition} of {self._source} is being written by another "
                                       f"ingester (pid {owner}, holding {path}) for more than {self._wait_s:g} s: "
                                       "is it stopped? Resume or stop it first") from None
                time.sleep(_RETRY_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._held[partition] = fd

    def release(self, partition: int) -> None:
        fd = self._held.pop(partition, None)
        if fd is not None:
            os.close(fd)

    def release_all(self) -> None:
        for partition in list(self._held):
            self.release(partition)
