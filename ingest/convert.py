"""A tree an older ingester wrote, made a table in place (``specmetrics table convert``), losing nothing.

The files stay where they are; one commit names them all and sets each source partition's next
offset where its stored flushes end, so readers read what they read before and an ingester
resumes where it would have. Which files count is decided once more, as readers of the tree did
(:mod:`storage.tree`): the files they left out are not committed, and are never read again; nor
is the last flush of a partition that a crash cut short, whose offsets the ingester reads again (as
the tree's ingester did when it started). A flush of dead letters only (or of offsets recorded
lost) gets a data file without rows under its name, because in a table a dead-letter file counts
when a committed data file has its name. The commit is the last step: a conversion cut short
leaves a tree (and perhaps a few row-less files, which count as the offsets their names cover, as
their dead letters did). No ingester may hold the tree meanwhile: each lock of ``_state/`` is held
for the conversion (an ingester refuses a tree; one of an older specmetrics may still run).
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

from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.storage.durable import write_durably
from specmetrics.storage.layout import DEAD_LETTER_DIR, STATE_DIR, FileName
from specmetrics.storage.table import DataFile, create_table, is_table
from specmetrics.storage.tree import footer_stats, stored_flushes, tree_files

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
        data_files, left_out = tree_files(data)
        for file in left_out:
            logger.warning("left out %s: %s", file.path, file.reason)
        cut = _cut_short(data, {data / file.path for file in left_out})
        data_files = [path for path in data_files if FileName.parse(path.name) not in cut]
        names = {name: path for path in data_files if (name := FileName.parse(path.name)) is not None}
        rowless = [_rowless_file(data, letters) for letters in sorted((data / DEAD_LETTER_DIR).glob("*.jsonl"))
                   if (name := FileName.parse(letters.name)) is not None and name not in names and name not in cut]
        committed = [*data_files, *rowless]
        positions: dict[tuple[str, int], int] = {}
        for path in committed:
            name = FileName.parse(path.name)
            assert name is not None  # readers take only files with an ingester's name
            key = (name.source, name.partition)
            positions[key] = max(positions.get(key, 0), name.end + 1)
        # the statistics from the footers the tree's rules read
        create_table(data, [DataFile.local(data, path, footer_stats(data, path)) for path in committed], positions)
    return Conversion(len(committed), len(rowless), len(left_out), positions)


def _cut_short(data: Path, left_out: set[Path]) -> set[FileName]:
    """The flushes to leave out of the commit because a crash cut them short: the last flush of a
    partition that lacks some of its files (its commit to the source was never made, so the
    ingester of the table reads its offsets again; its files stay, never read, until ``table
    vacuum``). A flush lacking files before the last one of its partition (files removed by hand)
    is an error. Flushes whose data files the tree's rules leave out (copies) are not looked at."""
    flushes = [flush for flush in stored_flushes(data) if not left_out.intersection(flush.paths)]
    last = {(f.name.source, f.name.partition): f for f in sorted(flushes, key=lambda f: f.name.end)}
    incomplete = [flush for flush in flushes if not flush.complete]
    if stray := [f for f in incomplete if last[(f.name.source, f.name.partition)] is not f]:
        flushes_named = "; ".join(f"{f.name.source} partition {f.name.partition} offsets {f.name.start}-{f.name.end}"
                                  for f in stray)
        raise ValueError(f"{data} holds flushes that lack some of their files before the last flush of their "
                         f"partition ({flushes_named}): restore them before converting; nothing was changed")
    for flush in incomplete:
        logger.warning("left out %d file(s) of a flush cut short by a crash (offsets %d-%d of %s partition %d), which "
                       "the ingester reads again: %s", len(flush.paths), flush.name.start, flush.name.end,
                       flush.name.source, flush.name.partition, [str(p) for p in flush.paths])
    return {flush.name for flush in incomplete}


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
