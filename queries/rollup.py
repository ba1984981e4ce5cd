"""Rollups: per data file, its request-steps counted per minute and outcome shape, and each
request's counts per minute.

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
with a committed data file, and ``specmetrics table vacuum`` removes those of files no commit
names. ``specmetrics verify`` recomputes every rollup from the raw rows and checks it equal.
``specmetrics report`` reads rollups instead of raw rows when they cover the window's files: over
the whole window but its partial first and last minutes, and at time buckets that are whole
minutes and context buckets that are multiples of :data:`ROLLUP_CONTEXT_TOKENS`
(queries/sql/report/report_counts_from_rollups.sql).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from specmetrics.queries.catalog import (
    SOURCE_VIEW,
    partition_casts,
    register_storage,
    rollup_connection,
    rollup_schema,
)
from specmetrics.storage.durable import write_durably
from specmetrics.storage.files import write_file
from specmetrics.storage.layout import ROLLUP_DIR
from specmetrics.storage.location import S3Location
from specmetrics.storage.readable import ReadableFiles, select_files

logger = logging.getLogger(__name__)

#: Width of the stored context-length buckets (batch_max_seq_len), in tokens, as file_rollup makes them.
ROLLUP_CONTEXT_TOKENS = 256
#: Width of the stored time buckets (file_rollup's minute).
ROLLUP_BUCKET = timedelta(minutes=1)
#: Rollups built side by side, each on a DuckDB connection of its own.
ROLLUP_THREADS = 2
#: The rows of file_rollup over one data file, computed once (a query of file_rollup costs as much
#: over 64 rows as the two below together: 0.06 s a file) and read as :data:`_ROLLUP_PARTS`.
_ROLLED = "rolled_up"
_ROLL_UP = f"CREATE OR REPLACE TEMP TABLE {_ROLLED} AS FROM file_rollup"
#: A rollup's two kinds of rows (file_rollup), each in a stable order (the keys come first, and each
#: key set is one row) and in row groups of its own: a reader of one kind (request_id IS NULL or IS
#: NOT NULL) skips the other's by their statistics.
_ROLLUP_PARTS = (f"FROM {_ROLLED} WHERE request_id IS NULL ORDER BY ALL",
                 f"FROM {_ROLLED} WHERE request_id IS NOT NULL ORDER BY ALL")


def build_missing(data: Path | S3Location, rebuild: bool = False, since: datetime | None = None,
                  until: datetime | None = None, progress: Callable[[int, int], None] | None = None) -> list[str]:
    """Write the rollup of every data file of the table at ``data`` (a local folder or an S3
    prefix; that may hold rows of ``since <= event_time < until``) that has none, or of all of them with
    ``rebuild``; returns the rollups written, as paths under ``data``. Only the files readers take
    are rolled up (:func:`storage.readable.select_files`); a rollup readers leave out (another
    schema) is written again. ``progress(done, total)`` after each one. A local data file that
    disappears meanwhile (``table vacuum`` removed it after a compaction) is skipped. A rollup of a
    file the log no longer holds is not read, and ``specmetrics table vacuum`` removes it."""
    files = select_files(data, since, until, rollup_schema())
    stored = set(files.rollups)
    todo = [relative for relative in files.data if rebuild or f"{ROLLUP_DIR}/{relative}" not in stored]
    made = _side_by_side(data, todo, lambda con, relative: _write_rollup(con, files, relative), progress)
    return [f"{ROLLUP_DIR}/{relative}" for relative in todo if made[relative]]


def _side_by_side(data: Path | S3Location, files: list[str], work: Callable[[duckdb.DuckDBPyConnection, str], bool],
                  progress: Callable[[int, int], None] | None = None) -> dict[str, bool]:
    """``work(con, file)`` for each of ``files``, on :data:`ROLLUP_THREADS` connections side by side
    (a small file's rollup is mostly DuckDB binding file_rollup, on one thread); what each gave, by file.
    ``progress(done, total)`` after each one. No file, no connection (a report's usual case: 0.05 s)."""
    results: dict[str, bool] = {}
    if not files:
        return results
    lock = threading.Lock()

    def run(share: list[str]) -> None:
        con = _connection(data)
        try:
            for file in share:
                result = work(con, file)
                with lock:
                    results[file] = result
                    if progress:
                        progress(len(results), len(files))
        finally:
            con.close()

    workers = min(ROLLUP_THREADS, len(files))
    with ThreadPoolExecutor(workers, thread_name_prefix="specmetrics-rollup") as pool:
        list(pool.map(run, [files[start::workers] for start in range(workers)]))
    return results


def _connection(data: Path | S3Location) -> duckdb.DuckDBPyConnection:
    """:func:`queries.catalog.rollup_connection`, reading S3 through pyarrow's client for a table there."""
    con = rollup_connection()
    register_storage(con, data)
    return con


def _write_rollup(con: duckdb.DuckDBPyConnection, files: ReadableFiles, relative: str) -> bool:
    """Write the rollup of the data file ``relative``: an object in one upload, or a local file
    durably through a temp file of its own (two processes may build the same rollup at once).
    False: the local data file went meanwhile, and no rollup of it is left."""
    source, target = files.location(relative), f"{ROLLUP_DIR}/{relative}"
    try:
        _read_only(con, source)
        con.execute(_ROLL_UP)
        write = partial(_write_parts, [con.sql(part).to_arrow_table() for part in _ROLLUP_PARTS])
    except (duckdb.IOException, FileNotFoundError):
        if isinstance(files.root, Path) and not Path(source).exists():
            return False
        raise
    if isinstance(files.root, S3Location):
        write_file(files.root, target, write)
        return True
    path = files.root / target
    write_durably(path, write, temp=path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"))
    if not Path(source).exists():
        path.unlink(missing_ok=True)
        return False
    return True


def _write_parts(parts: list[pa.Table], where: Path | pa.NativeFile) -> None:
    with pq.ParquetWriter(where, parts[0].schema, compression="zstd") as writer:
        for part in parts:
            writer.write_table(part)


def _read_only(con: duckdb.DuckDBPyConnection, data_file: Path | str) -> None:
    """Point the source view of ``con`` at ``data_file`` alone (its dt and hour from its path)."""
    relation = con.read_parquet(str(data_file), hive_partitioning=True)
    relation.project(f"* REPLACE ({partition_casts()})").create_view(SOURCE_VIEW, replace=True)


def window_files(data: Path | S3Location, since: datetime | None = None,
                 until: datetime | None = None) -> frozenset[str]:
    """The data files readers take that may hold rows of ``since <= event_time < until``, as paths
    under ``data``: compared before and after a report reads rollups, to see a file that arrived or
    went meanwhile."""
    return frozenset(select_files(data, since, until).data)


def rollups_cover(data: Path | S3Location, since: datetime | None = None, until: datetime | None = None) -> bool:
    """Whether every data file readers take that may hold rows of ``since <= event_time < until``
    has its rollup (only rollups of committed files are read)."""
    files = select_files(data, since, until, rollup_schema())
    if missing := len(files.data) - len(files.rollups):
        logger.info("rollups do not cover %s (%d data file(s) without one): reading raw rows", data, missing)
    return not missing


@dataclass
class RollupCheck:
    """Data files without a rollup (not yet built: no error), and rollups that differ from their
    recomputation from the raw rows (paths relative to the table). A rollup of a file the log does
    not hold is never read, so it is not looked at (``specmetrics table vacuum`` removes it)."""

    missing: list[str]
    unequal: list[str]

    @property
    def clean(self) -> bool:
        return not self.unequal


def check_rollups(data: Path | S3Location, files: ReadableFiles | None = None,
                  progress: Callable[[int, int], None] | None = None) -> RollupCheck:
    """Recompute every rollup from its data file and compare it with the stored one; only the
    files readers take (``files``, else selected here) are compared. A rollup of another
    schema counts as not equal. ``progress(done, total)`` after each comparison."""
    files = files or select_files(data, rollup_schema=rollup_schema())
    data_files = set(files.data)
    stored = {rollup.removeprefix(f"{ROLLUP_DIR}/") for rollup in files.rollups}
    misshapen = {entry.path.removeprefix(f"{ROLLUP_DIR}/") for entry in files.left_out
                 if entry.path.startswith(f"{ROLLUP_DIR}/") and "schema" in entry.reason}
    compared = sorted(data_files & stored)
    equal = _side_by_side(data, compared, lambda con, relative: _equals_recomputed(
        con, files.location(relative), files.location(f"{ROLLUP_DIR}/{relative}")), progress)
    unequal = [relative for relative in compared if not equal[relative]]
    return RollupCheck(sorted(data_files - stored - misshapen), sorted(unequal + sorted(misshapen & data_files)))


def _equals_recomputed(con: duckdb.DuckDBPyConnection, data_file: Path | str, rollup: Path | str) -> bool:
    """Whether ``rollup`` holds the rows of file_rollup over ``data_file``, each as often."""
    _read_only(con, data_file)
    [(differing,)] = con.execute(
        """
        WITH recomputed AS MATERIALIZED (FROM file_rollup),
             stored AS MATERIALIZED (FROM read_parquet($stored, hive_partitioning = false))
        SELECT count(*)
        FROM ((FROM recomputed EXCEPT ALL FROM stored) UNION ALL (FROM stored EXCEPT ALL FROM recomputed))
        """,
        {"stored": str(rollup)},
    ).fetchall()
    return bool(differing == 0)
