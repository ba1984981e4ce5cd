"""The files another engine's OPTIMIZE wrote, named again by ``table optimize``: their rows written
under names that say which offsets they hold, so that the table's offsets can be checked again.

Another engine's OPTIMIZE (Spark's, Databricks', delta-rs's) merges the ingester's files into files
named ``part-…``, and drops those without rows: the names no longer say which offsets of which
source partition the table holds, so ``verify`` cannot check them, a restarted ingester cannot tell
a restored table, and the dead-letter files of those flushes match no name. The rows still say
where they were read (``log_source``, ``log_partition`` and ``log_offset``, since schema 1.9), and
the log says each partition's next offset. An OPTIMIZE changes no data, so the offsets below the
next offset that no named file covers are those of the flushes it merged: each such stretch (from
the first offset the foreign files or the dead letters show, where no named file comes before)
becomes one name, under which the foreign files' rows of it are written (a file per hour folder,
as for a flush across hours; a file without rows where it has none, as for a flush of dead letters
alone) and its flushes' dead-letter files merged. Rows inside the offsets of a named flush that has
no file in their hour folder (a flush across hours, its file of one hour merged) write that flush
again whole, under a new attempt: a path once committed is never written again. One commit of
:mod:`storage.compaction` adds these files and removes those they replace.

A foreign file is left as it is, and with it every file of the partitions it holds, when a row of
it has no ``log_source`` (written before 1.9), or lies at offsets a named file of its hour folder
holds (a copy of stored rows: ``verify`` counts those twice) or at or past the partition's next
offset.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.storage.files import list_folder, read_bytes, write_bytes, write_file
from specmetrics.storage.layout import DEAD_LETTER_DIR, FileName
from specmetrics.storage.location import located
from specmetrics.storage.parquet import FileStats, ParquetOptions, write_data_file
from specmetrics.storage.table import DataFile, Table, TableFile, by_name

Partition = tuple[str, int]  # a source and a partition of it
Span = tuple[int, int]  # the first and last offset of a stretch


@dataclass(frozen=True, slots=True)
class Adoption:
    """The files to remove (the foreign files taken, and the named files of flushes written again with
    rows of theirs) and the named files holding their rows, written and to commit; the dead-letter
    files written for them (paths under the root); and how many foreign files were taken and left."""

    removed: tuple[TableFile, ...] = ()
    added: tuple[DataFile, ...] = ()
    letters: tuple[str, ...] = ()
    taken: int = 0
    left: int = 0


def adopt(table: Table, files: Sequence[TableFile], compression: str) -> Adoption:
    """Write the rows of the foreign files among the table's ``files`` under names (see the module
    docstring); nothing is committed."""
    named_files, foreign = by_name(files)
    if not foreign:
        return Adoption()
    named: dict[Partition, list[FileName]] = defaultdict(list)
    for flush in named_files:
        named[flush.source, flush.partition].append(flush)
    held = {file.relative: _offsets(table, file) for file in foreign}
    letter_names = [name for listed in list_folder(table.root, DEAD_LETTER_DIR)
                    if (name := FileName.parse(PurePosixPath(listed.relative).name)) is not None]
    letters = [letter for letter in table.committed_letters(letter_names, files) if letter not in named_files]
    partitions = {key for offsets in held.values() if offsets is not None for key in offsets}
    partitions |= {(letter.source, letter.partition) for letter in letters}
    positions = table.positions(partitions)
    folders = {name: {_folder(file) for file in in_folders} for name, in_folders in named_files.items()}
    places = {key: _Places(key, named[key], folders, _stretches(named[key], _first(key, held, letters), positions[key]))
              for key in partitions}
    left, blocked = _left(foreign, held, places)
    taken = [file for file in foreign if file.relative not in left]
    # A named flush with rows in a taken file is written again whole under a new attempt: its files and
    # those rows (a path once committed is never written again).
    moved = {name: name_again for file in taken for key, offsets in (held[file.relative] or {}).items()
             for name, name_again in places[key].named(offsets, _folder(file))}
    rewritten = {file.relative: name_again for name, name_again in moved.items() for file in named_files[name]}
    removed = [*taken, *(file for name in moved for file in named_files[name])]
    added = _write_rows(table, removed, rewritten, held, places, compression)
    written_letters = []
    for name, name_again in moved.items():
        written_letters += _write_letters(table, name_again, [name])
    for key, partition_places in places.items():
        if blocked(key) or not any(file.may_hold_partition(key[1]) for file in taken):
            continue
        for name in partition_places.stretches:
            if name not in added:  # a stretch of dead letters alone, or of steps without outcomes
                added[name] = _write_empty(table, taken, key, name, compression)
            written_letters += _write_letters(table, name, [letter for letter in letters
                                                            if (letter.source, letter.partition) == key
                                                            and name.start <= letter.start and letter.end <= name.end])
    return Adoption(tuple(removed), tuple(file for files in added.values() for file in files),
                    tuple(written_letters), len(taken), len(left))


class _Places:
    """Where the rows of a source partition in a foreign file go: into the flush of a named file whose
    offsets they lie in, in a folder where that flush has no file (a flush across hours, its file of
    one hour merged); else under the name of the stretch no name covers they lie in."""

    def __init__(self, key: Partition, named: Sequence[FileName], folders: dict[FileName, set[str]],
                 stretches: Sequence[Span]) -> None:
        self.stretches = [FileName(*key, start, end, os.urandom(6).hex()) for start, end in stretches]
        self.names = sorted([*named, *self.stretches], key=lambda name: name.start)
        self.folders = [folders.get(name, set()) for name in self.names]
        self.again = [name if name in self.stretches else FileName(*key, name.start, name.end, os.urandom(6).hex())
                      for name in self.names]  # the names to write under
        self.starts = np.array([name.start for name in self.names], dtype=np.int64)
        self.ends = np.array([name.end for name in self.names], dtype=np.int64)

    def of(self, offsets: np.ndarray, folder: str) -> np.ndarray | None:
        """Per offset, the index of its place in :attr:`names`; None when one has none (past the
        partition's next offset, or in a flush that has a file in ``folder``: a copy)."""
        at = np.searchsorted(self.starts, offsets, side="right") - 1
        if not len(self.names) or (at < 0).any() or (offsets > self.ends[np.maximum(at, 0)]).any():
            return None
        if any(folder in self.folders[index] for index in np.unique(at)):
            return None
        return at

    def named(self, offsets: np.ndarray, folder: str) -> list[tuple[FileName, FileName]]:
        """The named flushes among the places of ``offsets``, each with the name it is written again under."""
        at = self.of(offsets, folder)
        assert at is not None  # a file with rows out of place is left
        return [(self.names[index], self.again[index]) for index in np.unique(at).tolist()
                if self.names[index] not in self.stretches]


def _folder(file: TableFile) -> str:
    return PurePosixPath(file.relative).parent.as_posix()


def _offsets(table: Table, file: TableFile) -> dict[Partition, np.ndarray] | None:
    """The offsets a foreign file holds, per source partition (None: a row without ``log_source``)."""
    path, filesystem = located(table.root, file.relative)
    if "log_source" not in pq.read_schema(path, filesystem=filesystem).names:
        return None
    stored = table.read(file, ["log_source", "log_partition", "log_offset"])
    if stored["log_source"].null_count:
        return None
    steps = stored.group_by(["log_source", "log_partition", "log_offset"]).aggregate([])
    by_partition: dict[Partition, list[int]] = defaultdict(list)
    for source, partition, offset in zip(*(steps[column].to_pylist() for column in steps.column_names), strict=True):
        by_partition[str(source), partition].append(offset)
    return {key: np.sort(np.array(offsets, dtype=np.int64)) for key, offsets in by_partition.items()}


def _first(key: Partition, held: dict[str, dict[Partition, np.ndarray] | None], letters: Sequence[FileName]) -> int:
    """The first offset of a partition the foreign files or its dead letters show."""
    firsts = [int(offsets[key][0]) for offsets in held.values() if offsets is not None and key in offsets]
    firsts += [letter.start for letter in letters if (letter.source, letter.partition) == key]
    return min(firsts)


def _stretches(names: Sequence[FileName], first: int, position: int | None) -> list[Span]:
    """The stretches of offsets below ``position`` no name covers, from ``first`` or the first name."""
    if position is None:
        return []
    spans, at = [], min([first, *(name.start for name in names)])
    for name in sorted(names, key=lambda name: name.start):
        if name.start > at:
            spans.append((at, min(name.start, position) - 1))
        at = max(at, name.end + 1)
    if at < position:
        spans.append((at, position - 1))
    return [(start, end) for start, end in spans if start <= end]


def _left(foreign: Sequence[TableFile], held: dict[str, dict[Partition, np.ndarray] | None],
          places: dict[Partition, _Places]) -> tuple[set[str], Callable[[Partition], bool]]:
    """The foreign files left as they are (a row without a source, or where :meth:`_Places.of` has no
    place for it; then every file holding a partition such a file may hold, until none is added), and
    whether a partition is left with them."""
    left = {file.relative for file in foreign
            if (offsets := held[file.relative]) is None
            or any(places[key].of(at, _folder(file)) is None for key, at in offsets.items())}
    while True:
        keys = {key for relative in left for key in held[relative] or ()}
        numbers = {number for file in foreign if file.relative in left and held[file.relative] is None
                   for number in _numbers(file)}

        def blocked(key: Partition, keys: set[Partition] = keys, numbers: set[int] = numbers) -> bool:
            return key in keys or key[1] in numbers

        more = {file.relative for file in foreign if file.relative not in left
                and any(map(blocked, held[file.relative] or ()))}
        if not more:
            return left, blocked
        left |= more


def _numbers(file: TableFile) -> range:
    """The partition numbers a file may hold, by its statistics (without them: every one)."""
    return range(file.partitions[0], file.partitions[1] + 1) if file.partitions else range(2**31)


def _write_rows(table: Table, removed: Sequence[TableFile], rewritten: dict[str, FileName],
                held: dict[str, dict[Partition, np.ndarray] | None], places: dict[Partition, _Places],
                compression: str) -> dict[FileName, list[DataFile]]:
    """The rows of the files to remove written under their names: a named file's (in ``rewritten``)
    under its flush's new name, a taken foreign file's by :class:`_Places`; one folder's in memory at a time."""
    by_folder: dict[str, list[TableFile]] = defaultdict(list)
    for file in removed:
        by_folder[_folder(file)].append(file)
    added: dict[FileName, list[DataFile]] = defaultdict(list)
    for folder, in_folder in by_folder.items():
        pieces = [piece for file in in_folder for piece in (
            [(rewritten[file.relative], table.read(file))] if file.relative in rewritten
            else _pieces(table, file, held[file.relative] or {}, places))]
        for name, written in _write(table, folder, pieces, compression):
            added[name].append(written)
    return added


def _pieces(table: Table, file: TableFile, held: dict[Partition, np.ndarray],
            places: dict[Partition, _Places]) -> list[tuple[FileName, pa.Table]]:
    """A taken file's rows split by place: (name to write under, rows)."""
    data = table.read(file)
    sources = data["log_source"].cast(pa.string())
    pieces = []
    for key in held:
        mine = data.filter(pc.and_(pc.equal(sources, key[0]), pc.equal(data["log_partition"], key[1])))
        at = places[key].of(mine["log_offset"].to_numpy(), _folder(file))
        assert at is not None  # a file with rows out of place is left
        pieces += [(places[key].again[index], mine.filter(pa.array(at == index))) for index in np.unique(at).tolist()]
    return pieces


def _write(table: Table, folder: str, pieces: Sequence[tuple[FileName, pa.Table]],
           compression: str) -> list[tuple[FileName, DataFile]]:
    """The rows of ``pieces`` written into ``folder``, a file per name, in offset order."""
    grouped: dict[FileName, list[pa.Table]] = defaultdict(list)
    for name, rows in pieces:
        grouped[name].append(_as_stored(rows))
    written = []
    for name, parts in grouped.items():
        data = pa.concat_tables(parts)
        data = data.take(pc.sort_indices(data["log_offset"]))
        file = write_file(table.root, f"{folder}/{name.render('parquet')}",
                          partial(write_data_file, data, ParquetOptions(compression)))
        written.append((name, DataFile(file.relative, file.size, FileStats.of(data))))
    return written


def _as_stored(rows: pa.Table) -> pa.Table:
    """Rows of any writer as the ingester stores them (the columns a file lacks as nulls)."""
    columns = [rows[field.name] if field.name in rows.column_names else pa.nulls(rows.num_rows, field.type)
               for field in REQUEST_STEP_SCHEMA]
    return pa.Table.from_arrays(columns, names=REQUEST_STEP_SCHEMA.names).cast(REQUEST_STEP_SCHEMA)


def _write_empty(table: Table, taken: Sequence[TableFile], key: Partition, name: FileName,
                 compression: str) -> list[DataFile]:
    """A file without rows under ``name`` (a stretch of dead letters, or of steps without outcomes), in
    the folder of a taken file that may hold its partition."""
    folder = next(_folder(file) for file in taken if file.may_hold_partition(key[1]))
    empty = REQUEST_STEP_SCHEMA.empty_table()
    written = write_file(table.root, f"{folder}/{name.render('parquet')}",
                         partial(write_data_file, empty, ParquetOptions(compression)))
    return [DataFile(written.relative, written.size, FileStats.of(empty))]


def _write_letters(table: Table, name: FileName, letters: Sequence[FileName]) -> list[str]:
    """The lines of the dead-letter files ``letters`` written under ``name``, in offset order, each once
    (a flush written twice wrote them twice); the file written, if any."""
    seen: dict[bytes, None] = {}
    for letter in sorted(letters, key=lambda letter: (letter.start, letter.attempt)):
        for line in (read_bytes(table.root, f"{DEAD_LETTER_DIR}/{letter.render('jsonl')}") or b"").splitlines():
            seen.setdefault(line, None)
    if not seen:
        return []
    relative = f"{DEAD_LETTER_DIR}/{name.render('jsonl')}"
    write_file(table.root, relative, partial(write_bytes, b"".join(line + b"\n" for line in seen)))
    return [relative]
