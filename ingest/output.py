"""The ingester's writes into its table (laid out as :mod:`storage.layout` says): Parquet
files split by event-time hour, dead letters, lost ranges, each written durably into a local folder,
or as one object each under an S3 prefix (an object appears whole, or not at all, when its upload
completes; an S3 output is always a table, so a file counts only once committed)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from specmetrics.ingest.batch import DeadLetter
from specmetrics.storage.files import WrittenFile, write_bytes, write_file
from specmetrics.storage.layout import DEAD_LETTER_DIR, FLUSH_FILES_KEY, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.parquet import FileStats, ParquetOptions, write_data_file
from specmetrics.storage.table import DataFile

_HOUR_US = 3_600_000_000


def write_partitioned(
    out: Path | S3Location, name: FileName, table: pa.Table, event_time_us: np.ndarray, options: ParquetOptions,
    empty_at_us: int | None = None, other_files: int = 0,
) -> list[tuple[WrittenFile, DataFile]]:
    """Write ``table`` split by event-time hour, one durable file per hour: each as written, and as
    its commit names it (with its statistics). A table without rows is written as one file without
    rows in the hour of ``empty_at_us`` (if given), so that its name still says which offsets the
    flush covered. Each file records the flush's file count: these files and ``other_files`` more
    (its dead letters, written after them)."""
    hours = event_time_us // _HOUR_US if len(table) or empty_at_us is None else np.array([empty_at_us // _HOUR_US])
    unique_hours = np.unique(hours)
    flush_files = str(len(unique_hours) + other_files).encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), FLUSH_FILES_KEY.encode(): flush_files})
    written = []
    for hour in unique_hours:
        part = table if len(unique_hours) == 1 else table.filter(pa.array(hours == hour))
        when = datetime.fromtimestamp(int(hour) * 3600, UTC)
        # %Y does not pad years before 1000 on glibc
        relative = f"dt={when.year:04d}-{when:%m-%d}/hour={when:%H}/{name.render('parquet')}"
        file = write_file(out, relative, partial(write_data_file, part, options))
        written.append((file, DataFile(file.relative, file.size, FileStats.of(part))))
    return written


def write_dead_letters(out: Path | S3Location, name: FileName, letters: list[DeadLetter],
                       flush_files: int = 1) -> WrittenFile:
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
    return write_file(out, f"{DEAD_LETTER_DIR}/{name.render('jsonl')}", partial(write_bytes,
                                                                             ("\n".join(lines) + "\n").encode()))


def write_lost_range(out: Path | S3Location, name: FileName, reason: str) -> WrittenFile:
    """One JSON line recording that offsets ``name.start`` to ``name.end`` are gone from the source
    (``"lost": true``); its name covers them, so the offsets stay accounted for without a gap."""
    line = json.dumps({"lost": True, "source": name.source, "partition": name.partition, "offset": name.start,
                       "last_offset": name.end, "reason": reason, FLUSH_FILES_KEY: 1})
    return write_file(out, f"{DEAD_LETTER_DIR}/{name.render('jsonl')}", partial(write_bytes, (line + "\n").encode()))
