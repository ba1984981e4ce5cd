"""Where things lie in the ingester's output tree, and what its file names say: hive-partitioned
Parquet, dead letters, committed state.

::

    DATADIR/dt=YYYY-MM-DD/hour=HH/<source>-<partition>-<first offset>-<last offset>.parquet
    DATADIR/_rollup/dt=YYYY-MM-DD/hour=HH/<the same name>.parquet   (see queries.rollup)
    DATADIR/_dead_letter/<source>-<partition>-<first offset>-<last offset>.jsonl   (or a lost range)
    DATADIR/_state/<source>.offsets.json     (local log sources: the committed offset, a hint)
    DATADIR/_state/<source>.lock             (local log sources: held by the one ingester)
    DATADIR/_state/<source>.identity.json    (local log sources: the log the name stands for)
    DATADIR/_state/<source>-<partition>.lock (held while a flush of the partition is written, see ingest.partition_lock)

File names are deterministic: the same input gives the same names, so a restart after a
crash rewrites a file instead of adding a second copy. One flush writes several files (one
Parquet file per event-time hour, a dead-letter file), one after the other; each records how
many the flush wrote (:data:`FLUSH_FILES_KEY`), so a flush cut short by a crash is recognised
and rewritten on start (:mod:`ingest.recovery`). A complete flush is stored for good. The
ingester writes the files (:mod:`ingest.output`), durably (:mod:`storage.durable`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The data files, relative to the tree: hive partitions by UTC date and hour of event_time.
DATA_GLOB = "dt=*/hour=*/*.parquet"
#: The folder of the rollups, which mirrors the data files' paths beneath it.
ROLLUP_DIR = "_rollup"
DEAD_LETTER_DIR = "_dead_letter"
STATE_DIR = "_state"
#: Parquet key-value metadata, and dead-letter JSON field, holding how many files the flush wrote.
FLUSH_FILES_KEY = "specmetrics.flush_files"
_NAME = re.compile(r"^(?P<source>\w+)-(?P<partition>\d+)-(?P<start>\d{20})-(?P<end>\d{20})"
                   r"(\.(?P<attempt>[0-9a-f]{12}))?\.(parquet|jsonl)$")


@dataclass(frozen=True, slots=True)
class FileName:
    """What an output file's name says."""

    source: str
    partition: int
    start: int
    end: int
    attempt: str = ""  # in a table (storage.table): which write of the flush, so that no two share a name

    def render(self, suffix: str) -> str:
        attempt = f".{self.attempt}" if self.attempt else ""
        return f"{self.source}-{self.partition}-{self.start:020d}-{self.end:020d}{attempt}.{suffix}"

    @classmethod
    def parse(cls, name: str) -> FileName | None:
        m = _NAME.match(name)
        if m is None:
            return None
        return cls(m["source"], int(m["partition"]), int(m["start"]), int(m["end"]), m["attempt"] or "")
