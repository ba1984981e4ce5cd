"""Rollups: per data file, its request-steps counted per minute and outcome shape.

::

    DATADIR/_rollup/dt=YYYY-MM-DD/hour=HH/<the data file's name>.parquet

A rollup is a pure function of its data file, :data:`ROLLUP_SELECT`: derived data, like a
materialized view. :func:`build_missing` writes those a tree lacks; ``specmetrics report``
calls it for the days of its window before it reads (so scheduled reports keep them current,
each run adding only the files ingested since the last), and ``specmetrics rollup`` for a whole
tree. The ingester does not write them: its throughput stays that of writing the data alone.
Data files are immutable once renamed into place; a file the ingester removes after a crash
(see :func:`ingest.output.remove_uncommitted`) takes its rollup with it, and
:func:`build_missing` deletes any rollup left without its data file. ``specmetrics verify``
recomputes every rollup from the raw rows and checks it equal. ``specmetrics report`` reads
rollups instead of raw rows when they cover the window's files: over the whole window but its
partial first and last minutes, and at time buckets that are whole minutes and context buckets
that are multiples of :data:`ROLLUP_CONTEXT_TOKENS`
(queries/sql/intermediate/report_rollup_stored.sql).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache, partial
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.durable import write_durably
from ingest.layout import ROLLUP_DIR
from ingest.tree_files import TreeFiles, partition_files, select_files
from schemas.arrow import OUTCOME_SCHEMA

logger = logging.getLogger(__name__)

#: Width of the stored context-length buckets (batch_max_seq_len), in tokens.
ROLLUP_CONTEXT_TOKENS = 256
#: One rollup row: the group, the minute, the context bucket and the outcome shape, with the
#: number of request-steps and the first and last event time among them. Casts fix the types,
#: so a rollup and its recomputation compare equal whatever types its data file was read with.
ROLLUP_SELECT = f"""
SELECT
    CAST(engine_id AS VARCHAR) AS engine_id,
    CAST(model AS VARCHAR) AS model,
    CAST(method AS VARCHAR) AS method,
    CAST(num_spec_tokens AS INTEGER) AS num_spec_tokens,
    make_timestamp(epoch_us(CAST(event_time AS TIMESTAMP)) // 60000000 * 60000000) AS minute,
    CAST(batch_max_seq_len // {ROLLUP_CONTEXT_TOKENS} * {ROLLUP_CONTEXT_TOKENS} AS INTEGER) AS context_start,
    CAST(kind AS VARCHAR) AS kind,
    CAST(k_zero_reason AS VARCHAR) AS k_zero_reason,
    CAST(k_sched AS INTEGER) AS k_sched,
    CAST(k_valid AS INTEGER) AS k_valid,
    CAST(k_invalid AS INTEGER) AS k_invalid,
    CAST(accepted AS INTEGER) AS accepted,
    CAST(count(*) AS BIGINT) AS request_steps,
    min(CAST(event_time AS TIMESTAMP)) AS first_event,
    max(CAST(event_time AS TIMESTAMP)) AS last_event
"""
_KEYS = "engine_id, model, method, num_spec_tokens, minute, context_start, kind, k_zero_reason, " \
        "k_sched, k_valid, k_invalid, accepted"
_ROLLUP_OF = ROLLUP_SELECT + " FROM {source} GROUP BY ALL ORDER BY " + _KEYS


def rollup_path(data: Path, data_file: Path) -> Path:
    """Where the rollup of ``data_file`` (a file of the tree under ``data``) lives."""
    return data / ROLLUP_DIR / data_file.relative_to(data)


def build_missing(data: Path, rebuild: bool = False, since: datetime | None = None, until: datetime | None = None,
                  progress: Callable[[int, int], None] | None = None) -> list[Path]:
    """Write the rollup of every data file under ``data`` (of the days from ``since`` to
    ``until``) that has none, or of all of them with ``rebuild``; returns the rollups written.
    Only the files readers take are rolled up (:func:`ingest.tree_files.select_files`); a
    rollup readers leave out (another schema) is written again. ``progress(done, total)`` after
    each one. Rollups of those days whose data file is gone are deleted first. A data file that
    disappears meanwhile (the ingester removes the files of a flush it never committed) is
    skipped, and a rollup written for it deleted."""
    for orphan in sorted(partition_files(data / ROLLUP_DIR, since, until)):
        if not (data / orphan.relative_to(data / ROLLUP_DIR)).exists():
            logger.info("removing the rollup of a data file that is gone: %s", orphan)
            orphan.unlink(missing_ok=True)
    files = select_files(data, since, until, rollup_schema())
    stored = set(files.rollups)
    todo = [f for f in files.data if rebuild or rollup_path(data, f) not in stored]
    written = []
    con = duckdb.connect()
    try:
        for done, data_file in enumerate(todo, 1):
            target = rollup_path(data, data_file)
            try:
                _write_rollup(con, data_file, target)
            except (duckdb.IOException, FileNotFoundError):
                if data_file.exists():
                    raise
            if data_file.exists():
                written.append(target)
            else:
                target.unlink(missing_ok=True)
            if progress:
                progress(done, len(todo))
    finally:
        con.close()
    return written


def _write_rollup(con: duckdb.DuckDBPyConnection, data_file: Path, target: Path) -> None:
    """Durably write the rollup of ``data_file`` to ``target``, through a temp file of its own
    (two processes may build the same rollup at once)."""
    rolled = con.sql(_ROLLUP_OF.format(source="read_parquet($file, hive_partitioning = false)"),
                     params={"file": str(data_file)}).to_arrow_table()
    write_durably(target, partial(pq.write_table, rolled, compression="zstd"),
                  temp=target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp"))


@cache
def rollup_schema() -> pa.Schema:
    """The columns and types of a rollup file, as :data:`ROLLUP_SELECT` makes them."""
    con = duckdb.connect()
    try:
        con.register("rows", OUTCOME_SCHEMA.empty_table())
        return con.sql(_ROLLUP_OF.format(source="rows")).to_arrow_table().schema
    finally:
        con.close()


def window_files(data: Path, since: datetime | None = None, until: datetime | None = None) -> frozenset[Path]:
    """The data files readers take of the days from ``since`` to ``until``, relative to
    ``data``: compared before and after a report reads rollups, to see a file that arrived or
    went meanwhile."""
    return frozenset(path.relative_to(data) for path in select_files(data, since, until).data)


def rollups_cover(data: Path, since: datetime | None = None, until: datetime | None = None) -> bool:
    """Whether every data file readers take of the days from ``since`` to ``until`` has its
    rollup, and every rollup of those days its data file (a rollup left by a deleted file would
    count rows that are gone)."""
    files = select_files(data, since, until, rollup_schema())
    data_files = {path.relative_to(data) for path in files.data}
    stored = {path.relative_to(data / ROLLUP_DIR) for path in files.rollups}
    if data_files != stored:
        logger.info("rollups do not cover %s (%d data file(s) without one, %d without data): reading raw rows",
                    data, len(data_files - stored), len(stored - data_files))
        return False
    return True


@dataclass
class RollupCheck:
    """Data files without a rollup (not yet built: no error), rollups without a data file, and
    rollups that differ from their recomputation from the raw rows (paths relative to the tree)."""

    missing: list[str]
    orphaned: list[str]
    unequal: list[str]

    @property
    def clean(self) -> bool:
        return not (self.orphaned or self.unequal)


def check_rollups(data: Path, files: TreeFiles | None = None) -> RollupCheck:
    """Recompute every rollup from its data file and compare it with the stored one; only the
    files readers take (``files``, else selected here) are compared. A rollup of another
    schema counts as not equal."""
    files = files or select_files(data, rollup_schema=rollup_schema())
    data_files = {path.relative_to(data).as_posix() for path in files.data}
    stored = {path.relative_to(data / ROLLUP_DIR).as_posix() for path in files.rollups}
    misshapen = {entry.path.removeprefix(f"{ROLLUP_DIR}/") for entry in files.left_out
                 if entry.path.startswith(f"{ROLLUP_DIR}/") and "schema" in entry.reason}
    both = sorted(data_files & stored)
    unequal: list[str] = []
    if both:
        relative = r"regexp_extract(filename, '(dt=[^/]+/hour=[^/]+/[^/]+)$', 1)"
        con = duckdb.connect()
        try:
            rows = con.sql(
                f"""
                WITH recomputed AS (
                    {ROLLUP_SELECT}, {relative} AS file
                    FROM read_parquet($data, filename = true, hive_partitioning = false, union_by_name = true)
                    GROUP BY ALL
                ), stored AS (
                    SELECT * EXCLUDE (filename), {relative} AS file
                    FROM read_parquet($stored, filename = true, hive_partitioning = false)
                ), differing AS (
                    (FROM recomputed EXCEPT ALL FROM stored) UNION ALL (FROM stored EXCEPT ALL FROM recomputed)
                )
                SELECT DISTINCT file FROM differing ORDER BY file
                """,
                params={"data": [str(data / f) for f in both], "stored": [str(data / ROLLUP_DIR / f) for f in both]},
            ).fetchall()
        finally:
            con.close()
        unequal = [str(file) for (file,) in rows]
    return RollupCheck(sorted(data_files - stored - misshapen), sorted(stored - data_files),
                       sorted(unequal + sorted(misshapen & data_files)))
