"""Checking a table: every offset stored once, every event once.

File names say which offsets a flush covered (Parquet for the valid records, without rows when
none of its steps had an outcome; ``_dead_letter`` JSON lines for the rejected ones), so per
source and partition the ranges of the committed files must follow each other with no gap and no
overlap. Event ids must appear at one (source, partition, offset) only: a second copy means the
same step was produced twice (at-least-once delivery upstream) or ingested twice; a row of one
offset in two committed files is counted twice by every reader. A rollup must equal the rollup
recomputed from its data file's rows, and have its data file (queries.rollup); data files without
a rollup yet are only counted. Offsets the ingester recorded as lost (gone from the source: a
``_dead_letter`` line with ``"lost": true``) are covered, but listed, and the table is not clean
while any is. Records set aside as dead letters (their bytes kept) are counted per source
partition and reason, apart from both, with those of flushes whose data file another engine's
OPTIMIZE rewrote (:meth:`storage.table.Table.committed_letters`). Files readers leave out
(missing, damaged, of another size than committed) are listed and make the table not clean; data
files no commit names are listed, and those of a commit that should have come by now make it not
clean. This module sits with the queries, not the ingester: rollups are the queries' derived data,
and the ingester imports nothing from queries.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

import duckdb

from specmetrics.queries.catalog import register_storage, rollup_schema
from specmetrics.queries.rollup import RollupCheck, check_rollups
from specmetrics.storage.damage import parquet_damage, size_damage
from specmetrics.storage.files import list_folder, read_bytes
from specmetrics.storage.layout import DEAD_LETTER_DIR, ROLLUP_DIR, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.readable import LeftOut, select_files
from specmetrics.storage.table import IN_FLIGHT_HOURS, Table, is_table


@dataclass
class PartitionCoverage:
    source: str
    partition: int
    first: int
    last: int
    flushes: int
    gaps: list[tuple[int, int]] = field(default_factory=list)  # missing offset ranges, inclusive
    overlaps: list[tuple[int, int]] = field(default_factory=list)  # offset ranges stored twice, inclusive


@dataclass(frozen=True)
class RecordedLoss:
    """Offsets ``first`` to ``last`` the ingester recorded as gone from the source."""

    source: str
    partition: int
    first: int
    last: int
    reason: str


@dataclass
class SetAside:
    """Records of one source partition the ingester set aside as dead letters for one reason: their
    original bytes are in ``_dead_letter/``, their rows in no data file."""

    source: str
    partition: int
    reason: str
    records: int
    first: int  # offset of the first and the last such record
    last: int


@dataclass
class VerifyReport:
    partitions: list[PartitionCoverage]
    rollups: RollupCheck
    duplicate_events: int = 0  # event ids stored at more than one position
    duplicate_examples: list[tuple[str, int]] = field(default_factory=list)  # (event id, copies)
    #: Rows readers count more than once: the same row of one position in several committed data files.
    rows_twice: int = 0
    rows_twice_examples: list[tuple[str, str, int]] = field(default_factory=list)  # (event id, request id, copies)
    lost: list[RecordedLoss] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)  # files readers do not read, with the reason
    set_aside: list[SetAside] = field(default_factory=list)  # dead letters, per source partition and reason
    uncommitted: list[str] = field(default_factory=list)  # a table's data files no commit names: never read
    #: Data files readers take that do not decode (their footer or a page), with the problem: their rows
    #: are not checked, and the exit code says the store is damaged.
    damaged: list[LeftOut] = field(default_factory=list)
    #: A table's committed data files whose names carry no offsets (another application wrote them, such as
    #: delta-rs's own optimize): their rows are read and checked for copies, their offsets cannot be.
    foreign: list[str] = field(default_factory=list)
    #: Offsets a table's data files hold past the log's next offset of their partition, older than a flush in
    #: flight: their commit is missing (lost, or a writer killed between them and it), readers do not see them.
    #: (source, partition, first, last), merged per partition.
    commit_missing: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: A table's partitions whose log says more offsets are stored than its data files hold (a restore):
    #: (source, partition, the log's next offset, the data files' next offset).
    log_ahead: list[tuple[str, int, int, int]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Every offset stored once, every event once, nothing lost or left out: dead letters aside."""
        return not self.duplicate_events and not self.rows_twice \
            and not any(p.gaps or p.overlaps for p in self.partitions) and self.rollups.clean and not self.lost \
            and not self.left_out and not self.log_ahead and not self.damaged \
            and not self.commit_missing and not self.foreign


_DATA_FILE = re.compile(r"^dt=[^/]+/hour=[^/]+/[^/]+\.parquet$")


def verify_table(data: Path | S3Location, examples: int = 10,
                 progress: Callable[[str, int, int], None] | None = None) -> VerifyReport:
    """The table at ``data`` (a local folder or an S3 prefix): its committed files present with
    their committed size and readable, offsets covered once, events once, dead letters of committed
    flushes, rollups equal to their recomputation from the raw rows, and the data files no commit
    names. ``progress(step, done, total)`` after each file of the two steps that take most of the
    time: ``pages`` (a data file's pages decoded) and ``rollups`` (a rollup recomputed from its file)."""
    files = select_files(data, rollup_schema=rollup_schema())
    listed = {file.relative: file for file in list_folder(data, "", recursive=True)}
    left_out, present, damaged = list(files.left_out), [], []
    for checked, file in enumerate(files.files, 1):
        if (wrong_size := size_damage(found.size if (found := listed.get(file.relative)) else None, file.size)):
            left_out.append(LeftOut(file.relative, wrong_size))
        elif (problem := parquet_damage(data, file.relative, recorded=file.recorded)) is None:
            present.append(file)
        else:
            damaged.append(LeftOut(file.relative, problem))
        if progress:
            progress("pages", checked, len(files.files))
    table = Table(data) if is_table(data) else None  # an empty folder: nothing to verify
    names = {FileName.parse(PurePosixPath(file.relative).name) for file in files.files}
    letter_names = {name: relative for relative in sorted(listed) if relative.startswith(f"{DEAD_LETTER_DIR}/")
                    and (name := FileName.parse(PurePosixPath(relative).name)) is not None}
    counted = table.committed_letters(letter_names, table.files()) if table else set()
    losses, set_aside = _dead_letters(read_bytes(data, relative) or b""
                                      for relative in sorted(letter_names[name] for name in counted))
    committed = set(files.data)
    uncommitted = sorted(relative for relative in listed if _DATA_FILE.match(relative) and relative not in committed)
    # The offsets of a flush whose data file another engine rewrote cannot be checked: its letters alone would
    # look like gaps between them.
    coverage = _coverage([PurePosixPath(relative) for relative in
                          [*(file.relative for file in present), *(letter_names[name] for name in counted & names)]])
    unreadable = {file.path for file in damaged} | {f"{ROLLUP_DIR}/{file.path}" for file in damaged}
    readable = replace(files, files=tuple(file for file in files.files if file.relative not in unreadable),
                       rollups=tuple(rollup for rollup in files.rollups if rollup not in unreadable))
    rollups = check_rollups(data, readable, partial(progress, "rollups") if progress else None)
    return VerifyReport(
        coverage, rollups,
        **_duplicates([file.location for file in present], examples, data),
        lost=losses, left_out=sorted(left_out, key=lambda file: file.path), set_aside=set_aside,
        uncommitted=uncommitted, damaged=damaged, log_ahead=_log_ahead(table, coverage) if table else [],
        commit_missing=_commit_missing(table, [(PurePosixPath(relative).name, listed[relative].mtime_s)
                                               for relative in uncommitted]) if table else [],
        foreign=[file.relative for file in files.files if FileName.parse(PurePosixPath(file.relative).name) is None])


def _commit_missing(table: Table, files: Sequence[tuple[str, float]]) -> list[tuple[str, int, int, int]]:
    """Of data files no commit names (name, when last changed), the offsets past their partition's next
    offset in the log, of files older than a flush in flight; merged into ranges per partition."""
    cutoff = time.time() - IN_FLIGHT_HOURS * 3600
    old = [name for name, changed in ((FileName.parse(file), changed) for file, changed in files)
           if name is not None and changed <= cutoff]
    positions = table.positions({(name.source, name.partition) for name in old}) if old else {}
    spans: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for name in old:
        if name.start >= (positions[name.source, name.partition] or 0):
            spans[name.source, name.partition].append((name.start, name.end))
    merged = []
    for (source, partition), ranges in sorted(spans.items()):
        first, last = sorted(ranges)[0]
        for start, end in sorted(ranges)[1:]:
            if start > last + 1:
                merged.append((source, partition, first, last))
                first = start
            last = max(last, end)
        merged.append((source, partition, first, last))
    return merged


def _log_ahead(table: Table, partitions: Sequence[PartitionCoverage]) -> list[tuple[str, int, int, int]]:
    """The partitions whose log's next offset is past the end of their data files (Table.data_ends)."""
    ends = table.data_ends()
    if ends is None:
        return []
    ahead = []
    positions = table.positions((partition.source, partition.partition) for partition in partitions)
    for partition in partitions:
        position = positions[partition.source, partition.partition]
        end = ends.get((partition.source, partition.partition))
        if position is not None and end is not None and end < position:
            ahead.append((partition.source, partition.partition, position, end))
    return ahead


def _coverage(files: Sequence[PurePath]) -> list[PartitionCoverage]:
    ranges: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
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


def _dead_letters(contents: Iterable[bytes]) -> tuple[list[RecordedLoss], list[SetAside]]:
    """What ``_dead_letter`` holds: the ranges recorded lost (a file of one ``"lost": true`` line), and
    the records set aside, grouped by source partition and reason. A line that is not JSON is skipped:
    the file's name still covers its offsets. A record in two files (of a flush and of the write of it that
    lost its commit) counts once."""
    losses = set()
    groups: dict[tuple[str, int, str], set[int]] = defaultdict(set)
    for content in contents:
        for raw in content.splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            if line.get("lost") is True:
                losses.add(RecordedLoss(line["source"], line["partition"], line["offset"], line["last_offset"],
                                        line["reason"]))
            elif "offset" in line:
                groups[str(line.get("source")), int(line.get("partition", -1)), str(line.get("reason"))].add(
                    int(line["offset"]))
    set_aside = [SetAside(source, partition, reason, len(offsets), min(offsets), max(offsets))
                 for (source, partition, reason), offsets in sorted(groups.items())]
    return sorted(losses, key=lambda loss: (loss.source, loss.partition, loss.first)), set_aside


def _duplicates(files: Sequence[Path | str], examples: int, root: Path | S3Location) -> dict[str, Any]:
    """The duplicate events (an event id at more than one position: produced or ingested twice), and
    the rows stored twice (one row of one position in two data files: what readers count twice)."""
    if not files:
        return {}
    con = duckdb.connect()
    register_storage(con, root)
    try:
        con.execute(
            """
            CREATE TEMP TABLE stored AS
            SELECT event_id, request_id, log_partition, log_offset,
                   regexp_extract(filename, '([^/]+)-\\d+-\\d{20}-\\d{20}(\\.[0-9a-f]{12})?\\.parquet$', 1) AS src
            FROM read_parquet(?, filename = true, hive_partitioning = false, union_by_name = true)
            """, [[str(path) for path in files]])
        rows = con.execute(
            """
            WITH positions AS (
                SELECT DISTINCT event_id, src, log_partition, log_offset FROM stored
            ), copies AS (
                SELECT event_id, count(*) AS copies FROM positions GROUP BY event_id HAVING count(*) > 1
            )
            SELECT event_id, copies, count(*) OVER () AS total FROM copies ORDER BY copies DESC, event_id LIMIT ?
            """, [examples]).fetchall()
        twice = con.execute(
            """
            WITH copies AS (
                SELECT event_id, request_id, count(*) AS copies FROM stored
                GROUP BY event_id, request_id, log_partition, log_offset HAVING count(*) > 1
            )
            SELECT event_id, request_id, copies, sum(copies - 1) OVER () AS total FROM copies
            ORDER BY copies DESC, event_id, request_id LIMIT ?
            """, [examples]).fetchall()
    finally:
        con.close()
    return {"duplicate_events": int(rows[0][2]) if rows else 0,
            "duplicate_examples": [(str(e), int(c)) for e, c, _ in rows],
            "rows_twice": int(twice[0][3]) if twice else 0,
            "rows_twice_examples": [(str(e), str(r), int(c)) for e, r, c, _ in twice]}
