"""The ingester's writes into its output tree (laid out as :mod:`storage.layout` says): Parquet
files split by event-time hour, dead letters, lost ranges, each written durably."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.batch import DeadLetter
from storage.durable import write_atomically, write_durably
from storage.layout import DEAD_LETTER_DIR, FLUSH_FILES_KEY, FileName

_HOUR_US = 3_600_000_000


@dataclass(frozen=True, slots=True)
class ParquetOptions:
    compression: str = "zstd"
    compression_level: int | None = None
    row_group_rows: int = 1_000_000


def write_partitioned(
    out: Path, name: FileName, table: pa.Table, event_time_us: np.ndarray, options: ParquetOptions,
    empty_at_us: int | None = None, other_files: int = 0,
) -> list[Path]:
    """Write ``table`` split by event-time hour, one durable file per hour. A table without rows
    is written as one file without rows in the hour of ``empty_at_us`` (if given), so that its
    name still says which offsets the flush covered. Each file records the flush's file count:
    these files and ``other_files`` more (its dead letters, written after them)."""
    hours = event_time_us // _HOUR_US if len(table) or empty_at_us is None else np.array([empty_at_us // _HOUR_US])
    unique_hours = np.unique(hours)
    flush_files = str(len(unique_hours) + other_files).encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), FLUSH_FILES_KEY.encode(): flush_files})
    paths = []
    for hour in unique_hours:
        part = table if len(unique_hours) == 1 else table.filter(pa.array(hours == hour))
        when = datetime.fromtimestamp(int(hour) * 3600, UTC)
        # %Y does not pad years before 1000 on glibc
        path = out / f"dt={when.year:04d}-{when:%m-%d}" / f"hour={when:%H}" / name.render("parquet")
        write_durably(path, partial(_write_parquet, part, options))
        paths.append(path)
    return paths


def _write_parquet(table: pa.Table, options: ParquetOptions, path: Path) -> None:
    pq.write_table(table, path, compression=options.compression, compression_level=options.compression_level,
                   row_group_size=options.row_group_rows)


def write_dead_letters(out: Path, name: FileName, letters: list[DeadLetter], flush_files: int = 1) -> Path:
    """One JSON line per rejected record: reason and original bytes (base64), and the number of
    files of the flush (this one included)."""
    lines = (
        json.dumps({
            "source": name.source, "partition": letter.partition, "offset": letter.offset,
            "reason": letter.reason, "payload_base64": base64.b64encode(letter.payload).decode(),
            FLUSH_FILES_KEY: flush_files,
        })
        for letter in letters
    )
    path = out / DEAD_LETTER_DIR / name.render("jsonl")
    write_atomically(path, ("\n".join(lines) + "\n").encode())
    return path


def write_lost_range(out: Path, name: FileName, reason: str) -> Path:
    """One JSON line recording that offsets ``name.start`` to ``name.end`` are gone from the source
    (``"lost": true``); its name covers them, so the offsets stay accounted for without a gap."""
    line = json.dumps({"lost": True, "source": name.source, "partition": name.partition, "offset": name.start,
                       "last_offset": name.end, "reason": reason, FLUSH_FILES_KEY: 1})
    path = out / DEAD_LETTER_DIR / name.render("jsonl")
    write_atomically(path, (line + "\n").encode())
    return path


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A file as this process wrote it: another writer that renames its own file onto the
    same path gives that path another inode and modification time."""

    path: Path
    inode: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> WrittenFile:
        stat = path.stat()
        return cls(path, stat.st_ino, stat.st_mtime_ns)


def remove_written(files: list[WrittenFile]) -> list[Path]:
    """Delete the files of a flush whose commit was refused, unless they were replaced since:
    the partition's new owner may already have rewritten the same name, and that one stays."""
    removed = []
    for file in files:
        try:
            stat = file.path.stat()
        except FileNotFoundError:  # removed since (an incomplete flush, see ingest.recovery)
            continue
        if (stat.st_ino, stat.st_mtime_ns) == (file.inode, file.mtime_ns):
            file.path.unlink(missing_ok=True)
            removed.append(file.path)
    return removed
