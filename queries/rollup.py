"""Rollups: per data file, its request-steps counted per minute and outcome shape.

::

    DATADIR/_rollup/dt=YYYY-MM-DD/hour=HH/<the data file's name>.parquet

A rollup is a pure function of its data file, the view file_rollup
(queries/sql/rollup/file_rollup.sql) over that file's rows: derived data, like a materialized
view. Rollups live here, next to the views, because reports build them (not the ingester), and
their columns are the typed ones of request_steps. :func:`build_missing` writes those a table
lacks; ``specmetrics report`` calls it for the days of its window before it reads (so scheduled
reports keep them current, each run adding only the files committed since the last), and
``specmetrics rollup`` for a whole table. The ingester does not write them: its throughput stays
that of writing the data alone. Data files are immutable once committed; a rollup is read only
with a committed data file, and :func:`build_missing` deletes any rollup left without its data
file. ``specmetrics verify`` recomputes every rollup from the raw rows and checks it equal. ``specmetrics report`` reads
rollups instead of raw rows when they cover the window's files: over the whole window but its
partial first and last minutes, and at time buckets that are whole minutes and context buckets
that are multiples of :data:`ROLLUP_CONTEXT_TOKENS`
(queries/sql/report/report_counts_from_rollups.sql).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from specmetrics.queries.catalog import SOURCE_VIEW, partition_casts, rollup_connection, rollup_schema, s3_filesystem
from specmetrics.storage.durable import write_durably
from specmetrics.storage.files import write_file
from specmetrics.storage.layout import ROLLUP_DIR
from specmetrics.storage.location import S3Location
from specmetrics.storage.readable import ReadableFiles, ReadableObjects, partition_files, select_files, select_objects

logger = logging.getLogger(__name__)

#: Width of the stored context-length buckets (batch_max_seq_len), in tokens, as file_rollup makes them.
ROLLUP_CONTEXT_TOKENS = 256
#: Width of the stored time buckets (file_rollup's minute).
ROLLUP_BUCKET = timedelta(minutes=1)
#: A rollup's rows in a stable order: the keys come first, and each key set is one row.
_ROLLUP = "FROM file_rollup ORDER BY ALL"


def rollup_path(data: Path, data_file: Path) -> Path:
    """Where the rollup of ``data_file`` (a data file of the table in ``data``) lives."""
    return data / ROLLUP_DIR / data_file.relative_to(data)


def build_missing(data: Path | S3Location, rebuild: bool = False, since: datetime | None = None,
                  until: datetime | None = None, progress: Callable[[int, int], None] | None = None
                  ) -> list[Path] | list[str]:
    """Write the rollup of every data file under ``data`` (of the days from ``since`` to
    ``until``) that has none, or of all of them with ``rebuild``; returns the rollups written.
    Only the files readers take are rolled up (:func:`storage.readable.select_files`); a
    rollup readers leave out (another schema) is written again. ``progress(done, total)`` after
    each one. Rollups of those days whose data file is gone are deleted first. A data file that
    disappears meanwhile (``table vacuum`` removed it after a compaction) is skipped, and a
    rollup written for it deleted. Of a table on S3, the rollups are objects under the prefix
    (their paths under it are returned), built from the committed data files; a rollup of a file
    the log no longer holds is not read, and stays."""
    if isinstance(data, S3Location):
        return _build_missing_objects(data, rebuild, since, until, progress)
    for orphan in sorted(partition_files(data / ROLLUP_DIR, since, until)):
        if not (data / orphan.relative_to(data / ROLLUP_DIR)).exists():
            logger.info("removing the rollup of a data file that is gone: %s", orphan)
            orphan.unlink(missing_ok=True)
    files = select_files(data, since, until, rollup_schema())
    stored = set(files.rollups)
    todo = [f for f in files.data if rebuild or rollup_path(data, f) not in stored]
    written = []
    con = rollup_connection()
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


def _build_missing_objects(location: S3Location, rebuild: bool, since: datetime | None, until: datetime | None,
                           progress: Callable[[int, int], None] | None) -> list[str]:
    """:func:`build_missing` of a table on S3: each rollup one upload, of a committed data file."""
    objects = select_objects(location, since, until, rollup_schema())
    stored = set(objects.rollups)
    todo = [relative for relative in objects.data if rebuild or f"{ROLLUP_DIR}/{relative}" not in stored]
    written = []
    con = rollup_connection()
    try:
        con.register_filesystem(s3_filesystem(location))
        for done, relative in enumerate(todo, 1):
            _read_only(con, f"{location.url}/{relative}")
            rolled = con.sql(_ROLLUP).to_arrow_table()
            written.append(write_file(location, f"{ROLLUP_DIR}/{relative}",
                                      partial(pq.write_table, rolled, compression="zstd")).relative)
            if progress:
                progress(done, len(todo))
    finally:
        con.close()
    return written


def _write_rollup(con: duckdb.DuckDBPyConnection, data_file: Path, target: Path) -> None:
    """Durably write the rollup of ``data_file`` to ``target``, through a temp file of its own
    (two processes may build the same rollup at once)."""
    _read_only(con, data_file)
    rolled = con.sql(_ROLLUP).to_arrow_table()
    write_durably(target, partial(pq.write_table, rolled, compression="zstd"),
                  temp=target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp"))


def _read_only(con: duckdb.DuckDBPyConnection, data_file: Path | str) -> None:
    """Point the source view of ``con`` at ``data_file`` alone (its dt and hour from its path)."""
    relation = con.read_parquet(str(data_file), hive_partitioning=True)
    relation.project(f"* REPLACE ({partition_casts()})").create_view(SOURCE_VIEW, replace=True)


def window_files(data: Path | S3Location, since: datetime | None = None,
                 until: datetime | None = None) -> frozenset[str]:
    """The data files readers take of the days from ``since`` to ``until``, as paths under
    ``data``: compared before and after a report reads rollups, to see a file that arrived or
    went meanwhile."""
    if isinstance(data, S3Location):
        return frozenset(select_objects(data, since, until).data)
    return frozenset(path.relative_to(data).as_posix() for path in select_files(data, since, until).data)


def rollups_cover(data: Path | S3Location, since: datetime | None = None, until: datetime | None = None) -> bool:
    """Whether every data file readers take of the days from ``since`` to ``until`` has its
    rollup, and every rollup of those days its data file (a rollup left by a deleted file would
    count rows that are gone; of a table on S3 only rollups of committed files are read)."""
    if isinstance(data, S3Location):
        objects = select_objects(data, since, until, rollup_schema())
        missing = len(objects.data) - len(objects.rollups)
        if missing:
            logger.info("rollups do not cover %s (%d data file(s) without one): reading raw rows", data.url, missing)
        return not missing
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
    """Data files without a rollup (not yet built: no error), and rollups that differ from their
    recomputation from the raw rows (paths relative to the table). A rollup of a file the log does
    not hold is never read, so it is not looked at (``specmetrics rollup`` deletes it once its data
    file is gone)."""

    missing: list[str]
    unequal: list[str]

    @property
    def clean(self) -> bool:
        return not self.unequal


def check_rollups(data: Path, files: ReadableFiles | None = None) -> RollupCheck:
    """Recompute every rollup from its data file and compare it with the stored one; only the
    files readers take (``files``, else selected here) are compared. A rollup of another
    schema counts as not equal."""
    files = files or select_files(data, rollup_schema=rollup_schema())
    data_files = {path.relative_to(data).as_posix() for path in files.data}
    stored = {path.relative_to(data / ROLLUP_DIR).as_posix() for path in files.rollups}
    misshapen = {entry.path.removeprefix(f"{ROLLUP_DIR}/") for entry in files.left_out
                 if entry.path.startswith(f"{ROLLUP_DIR}/") and "schema" in entry.reason}
    con = rollup_connection()
    try:
        unequal = [f for f in sorted(data_files & stored)
                   if not _equals_recomputed(con, data / f, data / ROLLUP_DIR / f)]
    finally:
        con.close()
    return RollupCheck(sorted(data_files - stored - misshapen), sorted(unequal + sorted(misshapen & data_files)))


def check_rollups_on_s3(location: S3Location, objects: ReadableObjects) -> RollupCheck:
    """:func:`check_rollups` of a table on S3 (``objects``: what readers take from it)."""
    stored = {rollup.removeprefix(f"{ROLLUP_DIR}/") for rollup in objects.rollups}
    misshapen = {entry.path.removeprefix(f"{ROLLUP_DIR}/") for entry in objects.left_out}
    con = rollup_connection()
    try:
        con.register_filesystem(s3_filesystem(location))
        unequal = [relative for relative in sorted(stored) if not _equals_recomputed(
            con, f"{location.url}/{relative}", f"{location.url}/{ROLLUP_DIR}/{relative}")]
    finally:
        con.close()
    return RollupCheck(sorted(set(objects.data) - stored - misshapen), sorted(unequal + sorted(misshapen)))


def _equals_recomputed(con: duckdb.DuckDBPyConnection, data_file: Path | str, rollup: Path | str) -> bool:
    """Whether ``rollup`` holds the rows of file_rollup over ``data_file``, each as often."""
    _read_only(con, data_file)
    [(differing,)] = con.execute(
        f"""
        WITH recomputed AS ({_ROLLUP}), stored AS (FROM read_parquet($stored, hive_partitioning = false))
        SELECT count(*)
        FROM ((FROM recomputed EXCEPT ALL FROM stored) UNION ALL (FROM stored EXCEPT ALL FROM recomputed))
        """,
        {"stored": str(rollup)},
    ).fetchall()
    return bool(differing == 0)
