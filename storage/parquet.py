"""How the table's data files are written, and what their commits record of them: one writer for
the ingester's flushes and the files ``table optimize`` merges, so both encode alike, and each
file's statistics (:class:`FileStats`).

Every column is dictionary-encoded, the Parquet writer's default. Encodings that pack a request's
own length (``seq_len``, 1.47 of 3.0 bytes a row) tighter exist, but Spark's vectorized reader
(4.0) refuses BYTE_STREAM_SPLIT (1.11 bytes) and DELTA_BINARY_PACKED saves 1 % (BENCHMARKS.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq


@dataclass(frozen=True, slots=True)
class ParquetOptions:
    compression: str = "zstd"
    compression_level: int | None = None
    row_group_rows: int = 1_000_000


def write_data_file(table: pa.Table, options: ParquetOptions, where: Path | pa.NativeFile) -> None:
    """Write ``table`` as one Parquet file (with page checksums, which ``verify --pages`` checks)."""
    pq.write_table(table, where, compression=options.compression, compression_level=options.compression_level,
                   row_group_size=options.row_group_rows, write_page_checksum=True)


#: The columns whose least and greatest values each commit records per data file (Delta's file
#: statistics, with its row count): Delta readers (delta-rs, Polars, Spark, Trino) and
#: :meth:`storage.table.Table.files` skip the files outside a time window by them unopened.
STATS_COLUMNS = ("event_time", "log_partition", "log_offset")
#: Delta keeps times to the millisecond.
MS = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class FileStats:
    """A data file's rows and, when it has any (and they are known), the least (``low``) and greatest
    (``high``) value of each of :data:`STATS_COLUMNS`."""

    rows: int
    low: tuple[object, ...] = ()
    high: tuple[object, ...] = ()

    @classmethod
    def of(cls, data: pa.Table) -> FileStats:
        if not data.num_rows:
            return cls(0)
        bounds = [pc.min_max(data[column]) for column in STATS_COLUMNS]
        return cls(data.num_rows, tuple(bound["min"].as_py() for bound in bounds),
                   tuple(bound["max"].as_py() for bound in bounds))

    @classmethod
    def read(cls, path: Path | str, filesystem: pafs.FileSystem | None = None) -> FileStats:
        """Of a data file, from its footer."""
        return cls.footer(pq.read_metadata(path, filesystem=filesystem))

    @classmethod
    def footer(cls, metadata: pq.FileMetaData) -> FileStats:
        """From a data file's footer: its row groups' statistics (the rows alone where a row group
        has none)."""
        return cls.bounded(metadata.num_rows, column_ranges(metadata, STATS_COLUMNS))

    @classmethod
    def bounded(cls, rows: int, ranges: Mapping[str, tuple[Any, Any]]) -> FileStats:
        """Of a file of ``rows`` rows whose columns lie in ``ranges`` (:func:`column_ranges`; the
        rows alone where a column of :data:`STATS_COLUMNS` has none)."""
        if not rows or any(column not in ranges for column in STATS_COLUMNS):
            return cls(rows)
        return cls(rows, tuple(ranges[column][0] for column in STATS_COLUMNS),
                   tuple(ranges[column][1] for column in STATS_COLUMNS))

    def json(self) -> str:
        """As an add action's ``stats``. Delta keeps times to the millisecond: the least is
        rounded down and the greatest up (left out where that passes the year 9999), so that no
        reader skips a file holding a row it wants."""
        stats: dict[str, object] = {"numRecords": self.rows}
        if self.low:
            stats["minValues"] = {column: _stat(value, up=False) for column, value in zip(STATS_COLUMNS, self.low,
                                                                                          strict=True)}
            stats["maxValues"] = {column: stat for column, value in zip(STATS_COLUMNS, self.high, strict=True)
                                  if (stat := _stat(value, up=True)) is not None}
            stats["nullCount"] = dict.fromkeys(STATS_COLUMNS, 0)
        return json.dumps(stats)


def column_ranges(metadata: pq.FileMetaData, columns: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """The least and greatest value of each of ``columns`` over a file's row groups, from its
    footer, where every row group has them."""
    groups = [metadata.row_group(group) for group in range(metadata.num_row_groups)]
    if not groups:
        return {}
    where = {groups[0].column(i).path_in_schema: i for i in range(metadata.num_columns)}
    ranges = {}
    for column in (column for column in columns if column in where):
        stats = [group.column(where[column]).statistics for group in groups]
        bounds = [(stat.min, stat.max) for stat in stats if stat is not None and stat.has_min_max]
        if len(bounds) == len(groups):
            ranges[column] = (min(low for low, _ in bounds), max(high for _, high in bounds))
    return ranges


def _stat(value: object, up: bool) -> object:
    if not isinstance(value, datetime):
        return value
    below = value - timedelta(microseconds=value.microsecond % 1000)
    if not up or below == value:
        return below.isoformat(timespec="milliseconds")
    return None if below > datetime.max - MS else (below + MS).isoformat(timespec="milliseconds")
