"""A tree the ingester wrote, made a table in place (``specmetrics table convert``), losing nothing.

The files stay where they are; one commit names them all and sets each source partition's next
offset where its stored flushes end, so readers read what they read before and an ingester
resumes where it would have. Which files count is decided once more, as readers decide in a tree
(:func:`storage.readable.select_files`): the files they leave out are not committed, and are
never read again. A flush of dead letters only (or of offsets recorded lost) gets a data file
without rows under its name, because in a table a dead-letter file counts when a committed data
file has its name. The commit is the last step: a conversion cut short leaves a tree that reads
as before (and perhaps a few row-less files, which count as the offsets their names cover, as
their dead letters did). No ingester may write the tree meanwhile: each lock of ``_state/`` is
held for the conversion, and a tree-mode ingester that finds a table in its output stops.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from specmetrics.ingest.recovery import incomplete_flushes
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.storage.durable import write_durably
from specmetrics.storage.layout import DEAD_LETTER_DIR, STATE_DIR, FileName
from specmetrics.storage.readable import select_files
from specmetrics.storage.table import DataFile, create_table, is_table

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Conversion:
    """What a conversion committed: data files (row-less ones written for it among them), the
    files readers left out and that stay out, and each source partition's next offset."""

    files: int
    rowless: int
    left_out: int
    positions: dict[tuple[str, int], int]


def convert_tree(data: Path) -> Conversion:
    """Make the tree ``data`` a table (see the module docstring); an error, and nothing changed,
    when it is one already, an ingester holds one of its locks, or a flush lacks some of its files."""
    if is_table(data):
        raise ValueError(f"{data} is a table already")
    if not data.is_dir():
        raise FileNotFoundError(f"{data} is not a directory")
    with _ingesters_stopped(data):
        if incomplete := incomplete_flushes(data):
            raise ValueError(f"{data} holds flushes cut short by a crash ({'; '.join(incomplete)}): run "
                             "'specmetrics ingest' on it once to write them again, then convert")
        files = select_files(data)
        files.warn()
        names = {name: path for path in files.data if (name := FileName.parse(path.name)) is not None}
        rowless = [_rowless_file(data, letters) for letters in sorted((data / DEAD_LETTER_DIR).glob("*.jsonl"))
                   if (name := FileName.parse(letters.name)) is not None and name not in names]
        committed = [*files.data, *rowless]
        positions: dict[tuple[str, int], int] = {}
        for path in committed:
            name = FileName.parse(path.name)
            assert name is not None  # readers take only files with an ingester's name
            key = (name.source, name.partition)
            positions[key] = max(positions.get(key, 0), name.end + 1)
        create_table(data, [DataFile.local(data, path) for path in committed], positions)
    return Conversion(len(committed), len(rowless), len(files.left_out), positions)


def _rowless_file(data: Path, letters: Path) -> Path:
    """A data file without rows under the name of ``letters`` (a dead-letter file), in the hour it
    was written: the offsets its name covers stay covered once only committed data files count."""
    when = datetime.fromtimestamp(letters.stat().st_mtime, UTC)
    path = data / f"dt={when.year:04d}-{when:%m-%d}" / f"hour={when:%H}" / letters.with_suffix(".parquet").name
    write_durably(path, lambda temp: pq.write_table(REQUEST_STEP_SCHEMA.empty_table(), temp))
    return path


@contextmanager
def _ingesters_stopped(data: Path) -> Iterator[None]:
    """Hold every lock of the tree's ``_state/`` (an ingester of a local log holds its source's for
    as long as it runs; one of Kafka, its partition's while it writes a flush)."""
    with ExitStack() as held:
        for lock in sorted((data / STATE_DIR).glob("*.lock")):
            fd = os.open(lock, os.O_RDWR)
            held.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                raise ValueError(f"an ingester (pid {owner}) holds {lock}: stop the ingesters of {data} before "
                                 "converting it") from None
        yield
