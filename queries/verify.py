"""Checking an output tree: every offset stored once, every event once.

File names say which offsets a flush covered (Parquet for the valid records, without rows when
none of its steps had an outcome; ``_dead_letter`` JSON lines for the rejected ones), so per
source and partition the covered ranges must follow each other with no gap and no overlap.
Event ids must appear at one (source, partition, offset) only: a second copy means the same
step was produced twice (at-least-once delivery upstream) or ingested twice. A rollup must equal
the rollup recomputed from its data file's rows, and have its data file (queries.rollup); data
files without a rollup yet are only counted. Offsets the ingester recorded as lost (gone from the
source: a ``_dead_letter`` line with ``"lost": true``) are covered, but listed, and the tree is
not clean while any is, nor while a flush lacks some of the files it wrote. Files readers leave
out (storage.tree_files: foreign names or schemas, copies) are listed and make the tree not clean;
events and rollups are checked in the files readers take. This module sits
with the queries, not the ingester: rollups are the queries' derived data, and the ingester
imports nothing from queries.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ingest.recovery import incomplete_flushes
from queries.catalog import rollup_schema
from queries.rollup import RollupCheck, check_rollups
from storage.layout import DATA_GLOB, DEAD_LETTER_DIR, FileName
from storage.tree_files import LeftOut, select_files


@dataclass
class PartitionCoverage:
    source: str
    partition: int
    first: int
    last: int
    flushes: int
    gaps: list[tuple[int, int]] = field(default_factory=list)  # missing offset ranges, inclusive
    overlaps: list[tuple[int, int]] = field(default_factory=list)  # offset ranges stored twice, inclusive


@dataclass
class RecordedLoss:
    """Offsets ``first`` to ``last`` the ingester recorded as gone from the source."""

    source: str
    partition: int
    first: int
    last: int
    reason: str


@dataclass
class VerifyReport:
    partitions: list[PartitionCoverage]
    duplicate_events: int  # event ids stored at more than one position
    duplicate_examples: list[tuple[str, int]]  # (event id, copies)
    rollups: RollupCheck
    lost: list[RecordedLoss] = field(default_factory=list)
    incomplete_flushes: list[str] = field(default_factory=list)  # ingest.recovery.incomplete_flushes
    left_out: list[LeftOut] = field(default_factory=list)  # files readers do not read, with the reason

    @property
    def clean(self) -> bool:
        return not self.duplicate_events and not any(p.gaps or p.overlaps for p in self.partitions) \
            and self.rollups.clean and not self.lost and not self.incomplete_flushes and not self.left_out


def verify_tree(data: Path, examples: int = 10) -> VerifyReport:
    if not data.is_dir():
        raise FileNotFoundError(f"{data} is not a directory")
    files = select_files(data, rollup_schema=rollup_schema())
    return VerifyReport(_coverage(data), *_duplicate_events(files.data, examples), check_rollups(data, files),
                        lost=_recorded_losses(data), incomplete_flushes=incomplete_flushes(data),
                        left_out=list(files.left_out))


def _coverage(data: Path) -> list[PartitionCoverage]:
    ranges: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
    files = [*data.glob(DATA_GLOB), *(data / DEAD_LETTER_DIR).glob("*.jsonl")]
    for path in files:
        name = FileName.parse(path.name)
        if name is not None:
            ranges[name.source, name.partition].add((name.start, name.end))  # one flush may span several hours
    report = []
    for (source, partition), spans in sorted(ranges.items()):
        ordered = sorted(spans)
        coverage = PartitionCoverage(source, partition, ordered[0][0], max(e for _, e in ordered), len(ordered))
        covered_to = ordered[0][1]
        for start, end in ordered[1:]:
            if start > covered_to + 1:
                coverage.gaps.append((covered_to + 1, start - 1))
            elif start <= covered_to:
                coverage.overlaps.append((start, min(end, covered_to)))
            covered_to = max(covered_to, end)
        report.append(coverage)
    return report


def _recorded_losses(data: Path) -> list[RecordedLoss]:
    """The lost ranges in ``_dead_letter``: a file of one line each (other files start with a letter)."""
    losses = []
    for path in (data / DEAD_LETTER_DIR).glob("*.jsonl"):
        with path.open("rb") as file:
            try:
                line = json.loads(file.readline())
            except ValueError:
                continue
        if isinstance(line, dict) and line.get("lost") is True:
            losses.append(RecordedLoss(line["source"], line["partition"], line["offset"], line["last_offset"],
                                       line["reason"]))
    return sorted(losses, key=lambda loss: (loss.source, loss.partition, loss.first))


def _duplicate_events(files: Sequence[Path], examples: int) -> tuple[int, list[tuple[str, int]]]:
    if not files:
        return 0, []
    con = duckdb.connect()
    try:
        rows = con.execute(
            """
            WITH positions AS (
                SELECT DISTINCT event_id, regexp_extract(filename, '([^/]+)-\\d+-\\d{20}-\\d{20}\\.parquet$', 1) AS src,
                       log_partition, log_offset
                FROM read_parquet(?, filename = true, hive_partitioning = false, union_by_name = true)
            ), copies AS (
                SELECT event_id, count(*) AS copies FROM positions GROUP BY event_id HAVING count(*) > 1
            )
            SELECT event_id, copies, count(*) OVER () AS total FROM copies ORDER BY copies DESC, event_id LIMIT ?
            """,
            [[str(path) for path in files], examples],
        ).fetchall()
    finally:
        con.close()
    return (int(rows[0][2]) if rows else 0), [(str(e), int(c)) for e, c, _ in rows]
