"""The embedded local log as a source, with its committed offset in a state file."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import time
from pathlib import Path

from specmetrics.ingest.sources.base import LostRange, Source, SourceRecord
from specmetrics.storage.durable import write_atomically
from specmetrics.transport.log import LocalLogReader
from specmetrics.transport.log.directory import log_id, writers_idle

logger = logging.getLogger(__name__)
_POLL_INTERVAL_S = 0.05


class LocalLogSource(Source):
    """Reads one local log directory as partition 0. The committed offset lives in
    ``<state_dir>/<name>.offsets.json`` (the ingester keeps it beside its output); until
    :meth:`close`, ``<state_dir>/<name>.lock`` is locked, so a second reader of the same log into
    the same output is refused. ``<state_dir>/<name>.identity.json`` says which log the name
    stands for, so another log whose folder has the same name is refused too."""

    def __init__(self, log_dir: Path | str, state_dir: Path | str) -> None:
        self.log_dir = Path(log_dir)
        if not self.log_dir.is_dir():
            raise FileNotFoundError(f"local log directory {self.log_dir} does not exist")
        self.name = re.sub(r"[^A-Za-z0-9_]", "_", self.log_dir.resolve().name) or "log"
        identity = log_id(self.log_dir)
        self.identity = None if identity is None else f"local log {identity}"
        self._lock_fd = _lock_output(Path(state_dir) / f"{self.name}.lock")
        self._state_file = Path(state_dir) / f"{self.name}.offsets.json"
        self._losses: list[LostRange] = []
        self._warned_torn_tail: tuple[Path, int] | None = None
        try:
            _claim_name(Path(state_dir) / f"{self.name}.identity.json", self.log_dir)
        except BaseException:
            self.close()
            raise
        self._reader = LocalLogReader(self.log_dir)  # placed by seek()

    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        deadline = time.monotonic() + timeout_s
        while True:
            records = self._reader.read(max_records)
            self._losses = [LostRange(0, gap.first, gap.last, gap.reason) for gap in self._reader.take_gaps()]
            if records or self._losses or time.monotonic() >= deadline:
                if not records:
                    self._warn_of_torn_tail()
                return [SourceRecord(0, r.offset, r.payload, r.error) for r in records]
            time.sleep(_POLL_INTERVAL_S)

    def losses(self) -> list[LostRange]:
        losses, self._losses = self._losses, []
        return losses

    def committed(self) -> dict[int, int | None]:
        """The offsets file's offset: a hint (the stored files decide), so one that is missing or
        unreadable is None."""
        try:
            return {0: int(json.loads(self._state_file.read_text())["0"])}
        except FileNotFoundError:
            return {0: None}
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring the unreadable offsets file %s (%s): the stored files say where to resume",
                           self._state_file, exc)
            return {0: None}

    def seek(self, positions: dict[int, int | None]) -> None:
        self._reader = LocalLogReader(self.log_dir, positions.get(0) or 0)

    def commit(self, next_offsets: dict[int, int]) -> bool:
        write_atomically(self._state_file, json.dumps({str(p): o for p, o in next_offsets.items()}).encode())
        return True

    def close(self) -> None:
        """Release the output's lock."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _warn_of_torn_tail(self) -> None:
        """Once per torn tail that no writer is busy with (one was killed mid-append)."""
        torn = self._reader.torn_tail
        if torn is None or torn == self._warned_torn_tail:
            return
        with writers_idle(self.log_dir) as idle:
            if idle:
                logger.warning("local log segment %s ends with a torn record at byte %d: a writer was killed while "
                               "appending it, so it was never acknowledged and is not data; the next writer cuts it "
                               "off", *torn)
                self._warned_torn_tail = torn


def _claim_name(claim: Path, log_dir: Path) -> None:
    """A source name (the log folder's name) stands for one log in a tree: its offsets and files
    are that log's. The first ingester records the log's id (written by its first writer); a log
    from before ids existed is recorded by its path, and by its id once a writer has given it one."""
    identity = {"log_id": log_id(log_dir), "path": str(log_dir.resolve())}
    try:
        recorded = json.loads(claim.read_text())
    except FileNotFoundError:
        recorded = None
    if recorded is not None and recorded != identity:
        same = recorded["log_id"] == identity["log_id"] if recorded["log_id"] is not None else \
            recorded["path"] == identity["path"]
        if not same:
            raise ValueError(
                f"{claim.parent.parent} holds the local log {recorded['path']} (id {recorded['log_id']}) as source "
                f"{claim.name.removesuffix('.identity.json')!r}, and {identity['path']} (id {identity['log_id']}) "
                "is another log with a folder of the same name: ingest it into another tree, or rename its folder")
    if recorded != identity:
        write_atomically(claim, json.dumps(identity).encode())


def _lock_output(lock: Path) -> int:
    """One ingester per local log and output: a second would read the same records and write
    files of its own beside the first one's (or remove its temp files as leftovers). Unlike a Kafka
    group, nothing splits a local log between readers, so the second is refused. The lock is an
    ``flock`` (the kernel drops it when the process dies, so a killed ingester leaves none); the
    file holds the owner's pid, for the error message."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ValueError(f"another ingester (pid {owner}) is reading this log into {lock.parent.parent}: "
                         f"it holds {lock}; stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
