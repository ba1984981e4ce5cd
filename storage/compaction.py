"""Small files of a table merged (``specmetrics table optimize``): fewer files for every reader to
open, the same rows, one commit.

A live stream that goes quiet is flushed every few seconds (``flush_idle_s``), so a table fills
with small files, and every reader pays per file. Compaction merges, per ``dt``/``hour`` folder
and source partition, runs of committed flushes whose offsets follow each other, up to
``target_rows`` rows a file, into one file named for the whole run (with a new attempt token).
The dead-letter files of the run's flushes are merged under the same name, since a dead-letter
file counts when a committed data file has its name. One commit removes the run's files and adds
the merged one; the partitions' offsets do not change, so ingesters writing meanwhile are not
disturbed (their commits add other files). The removed files stay on disk until ``vacuum``
(readers of an older version may still read them), their rollups too; ``specmetrics table optimize``
then rolls up the days it merged in (:func:`queries.rollup.build_missing`). The files another
engine's OPTIMIZE wrote (named ``part-…``: no offsets) are named again in the same commit, their
rows under names of the offsets they hold (:mod:`storage.adoption`); those it cannot name are left
as they are, and do not stop the rest.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath

import pyarrow as pa

from specmetrics.storage.adoption import adopt
from specmetrics.storage.files import read_bytes, remove, write_bytes, write_file
from specmetrics.storage.layout import DEAD_LETTER_DIR, FileName
from specmetrics.storage.parquet import FileStats, ParquetOptions, write_data_file
from specmetrics.storage.table import DataFile, ReplaceRefused, Table, TableFile, by_name

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a compaction did: files merged into how many, their rows, the days (``dt``) of the
    files it wrote, the committed files another application wrote left as they are, and those
    named again (:mod:`storage.adoption`) into how many."""

    merged_files: int
    new_files: int
    rows: int
    days: tuple[str, ...]
    foreign: int = 0
    named_again: int = 0
    named_files: int = 0


def compact(table: Table, target_rows: int, compression: str = "zstd",
            progress: Callable[[int, int], None] | None = None) -> Compaction:
    """Merge the table's runs of small committed files (see the module docstring); ``progress(done,
    total)`` with the files merged so far after each run."""
    files = table.files()
    adoption = adopt(table, files, compression)
    rewritten = {file.relative for file in adoption.removed}
    runs = _runs(table, [file for file in files if file.relative not in rewritten], target_rows)
    total = sum(len(run) for run in runs)
    removed: list[TableFile] = list(adoption.removed)
    added: list[DataFile] = list(adoption.added)
    written_letters: list[str] = list(adoption.letters)
    rows = 0
    for run in runs:
        names, files = [name for name, _ in run], [file for _, file in run]
        merged = FileName(names[0].source, names[0].partition, names[0].start, names[-1].end, os.urandom(6).hex())
        data = pa.concat_tables([table.read(file) for file in files], promote_options="default")
        relative = PurePosixPath(files[0].relative).with_name(merged.render("parquet")).as_posix()
        written = write_file(table.root, relative, partial(write_data_file, data, ParquetOptions(compression)))
        letters = [read_bytes(table.root, f"{DEAD_LETTER_DIR}/{name.render('jsonl')}") for name in names]
        lines = b"".join(letter for letter in letters if letter)
        if lines:
            letters_file = f"{DEAD_LETTER_DIR}/{merged.render('jsonl')}"
            write_file(table.root, letters_file, partial(write_bytes, lines))
            written_letters.append(letters_file)
        removed.extend(files)
        added.append(DataFile(written.relative, written.size, FileStats.of(data)))
        rows += data.num_rows
        if progress:
            progress(len(removed) - len(adoption.removed), total)
    if added:
        try:
            table.replace(removed, added)
        except ReplaceRefused:
            for relative in [*(file.relative for file in added), *written_letters]:  # no commit names them
                remove(table.root, relative)
            raise
        logger.info("merged %d file(s) into %d (%d rows); named %d file(s) another application wrote again as %d",
                    len(removed) - len(adoption.removed), len(added) - len(adoption.added), rows, adoption.taken,
                    len(adoption.added))
    days = {run[0][1].dt for run in runs} | {file.dt for file in adoption.removed}
    return Compaction(len(removed) - len(adoption.removed), len(added) - len(adoption.added), rows,
                      tuple(sorted(days)), adoption.left, adoption.taken, len(adoption.added))


def _runs(table: Table, files: Sequence[TableFile], target_rows: int) -> list[list[tuple[FileName, TableFile]]]:
    """Runs of two or more of the table's ``files`` of one folder and source partition whose offsets
    follow each other, each of at most ``target_rows`` rows (the files another application wrote,
    without offsets in their names, in none)."""
    groups: dict[tuple[str, str, str, int], list[tuple[FileName, TableFile, int]]] = defaultdict(list)
    for name, in_folders in by_name(files)[0].items():
        for file in in_folders:
            # A flush with files in several hours keeps them: merged in one hour, its name would cover
            # offsets whose rows lie in another file too.
            rows = table.rows(file) if len(in_folders) == 1 else target_rows + 1
            groups[file.dt, file.hour, name.source, name.partition].append((name, file, rows))
    runs = []
    for group in groups.values():
        group.sort(key=lambda item: item[0].start)
        run: list[tuple[FileName, TableFile]] = []
        run_rows, end = 0, -2
        for name, file, file_rows in group:
            if run and (name.start != end + 1 or run_rows + file_rows > target_rows):
                runs.append(run)
                run, run_rows = [], 0
            end = name.end
            if file_rows > target_rows:
                continue
            run.append((name, file))
            run_rows += file_rows
        runs.append(run)
    return [run for run in runs if len(run) > 1]
