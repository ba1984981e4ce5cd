"""Where things lie in the ingester's output (a Delta table: :mod:`storage.table`), and what its
file names say: hive-partitioned Parquet, dead letters, committed state.

::

    DATADIR/_delta_log/<version>.json        the table's log (storage.table): which files count
    DATADIR/dt=YYYY-MM-DD/hour=HH/<source>-<partition>-<first offset>-<last offset>.<attempt>.parquet
    DATADIR/_rollup/dt=YYYY-MM-DD/hour=HH/<the same name>.parquet   (see queries.rollup)
    DATADIR/_dead_letter/<source>-<partition>-<first offset>-<last offset>.<attempt>.jsonl   (or a lost range)
    DATADIR/_state/<source>.offsets.json     (local log sources: the committed offset, a hint)
    DATADIR/_state/<source>.lock             (local log sources: held by the one ingester)
    DATADIR/_state/<source>.identity.json    (local log sources: the log the name stands for)

A file's name says which offsets of which source partition its flush covered, and which write of
the flush it is (the attempt token), so no two writers ever share a name. One flush writes several
files (one Parquet file per event-time hour, a dead-letter file), one after the other, and each
records how many the flush wrote (:data:`FLUSH_FILES_KEY`); a tree (the layout before tables:
names without attempt tokens, no log) is read by that count when it is converted
(:mod:`storage.tree`). The ingester writes the files (:mod:`ingest.output`), durably
(:mod:`storage.durable`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The data files, relative to the output: hive partitions by UTC date and hour of event_time.
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
    attempt: str = ""  # which write of the flush, so that no two share a name ("" in a tree)

    def render(self, suffix: str) -> str:
        attempt = f".{self.attempt}" if self.attempt else ""
        return f"{self.source}-{self.partition}-{self.start:020d}-{self.end:020d}{attempt}.{suffix}"

    @classmethod
    def parse(cls, name: str) -> FileName | None:
        m = _NAME.match(name)
        if m is None:
            return None
        return cls(m["source"], int(m["partition"]), int(m["start"]), int(m["end"]), m["attempt"] or "")
