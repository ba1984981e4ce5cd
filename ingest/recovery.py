"""Where to resume a partition: the stored files are the truth, the committed offset a hint.

File names say which offsets each flush stored (:class:`storage.layout.FileName`), and every
file of a flush says how many files the flush wrote (:data:`storage.layout.FLUSH_FILES_KEY`).
Flushes of a partition are written one after another, so only its last flush can be
incomplete (a crash between two of its files): that one is removed, with its rollups, and read
again. Every other file stays. The partition resumes after its last complete flush:

* no committed offset (a new consumer group, offsets expired or deleted, a broker that lost
  them), or one behind the stored files (the commit of a durable flush was lost): the files
  win, and nothing is read twice;
* a committed offset past the stored files: files that were stored and committed are missing
  (deleted, or this tree is not the one the offsets were committed for). That is an error, and
  nothing is removed: reading on would hide the hole, reading again would need the records;
* no files and no committed offset: from the source's first offset.

The event ids of the last steps stored (:func:`recent_steps`) let a new owner of the partition set
aside a step its producer sent again.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq

from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, FLUSH_FILES_KEY, ROLLUP_DIR, FileName
from specmetrics.storage.table import Table

logger = logging.getLogger(__name__)


class MissingStoredFiles(ValueError):
    """A partition's committed offset lies past the files the tree holds."""


@dataclass(frozen=True, slots=True)
class StoredFlush:
    """The files one flush of a partition left in the tree (its rollups not counted)."""

    name: FileName
    paths: list[Path]

    @property
    def recorded_files(self) -> int | None:
        """How many files the flush wrote, as its files say (None: written before they said)."""
        counts = [count for count in map(_flush_files, self.paths) if count is not None]
        return max(counts) if counts else None

    def stored_for_good(self, committed: int | None) -> bool:
        """All files the flush meant to write are there. For files written before flushes
        recorded their file count, the committed offset decides, as it did then (when there is one)."""
        recorded = self.recorded_files
        if recorded is None:
            return committed is None or self.name.start < committed
        return len(self.paths) >= recorded


def incomplete_flushes(out: Path) -> list[str]:
    """Flushes of any source and partition with fewer files than they wrote: the last one of a
    partition whose ingester has not restarted since a crash, or files removed by hand (which
    the offset ranges alone do not show when the flush's other files cover them)."""
    paths: dict[FileName, list[Path]] = defaultdict(list)
    for path in [*out.glob(DATA_GLOB), *(out / DEAD_LETTER_DIR).glob("*.jsonl")]:
        name = FileName.parse(path.name)
        if name is not None:
            paths[name].append(path)
    found = []
    for name in sorted(paths, key=lambda n: (n.source, n.partition, n.start, n.end)):
        flush = StoredFlush(name, paths[name])
        recorded = flush.recorded_files
        if recorded is not None and len(flush.paths) < recorded:
            found.append(f"{name.source} partition {name.partition} offsets {name.start}-{name.end}: "
                         f"{len(flush.paths)} of its {recorded} files")
    return found


def resume_positions(out: Path, source: str, committed: dict[int, int | None]) -> dict[int, int | None]:
    """For each partition in ``committed`` (its committed offset, or None), where to resume
    reading, after removing its incomplete last flush and stray temp files (see the module
    docstring). Partitions not in ``committed`` are left alone: other readers own them."""
    flushes = _stored_flushes(out, source, set(committed))
    return {partition: _resume_position(out, source, partition, flushes.get(partition, []), offset)
            for partition, offset in committed.items()}


def _resume_position(out: Path, source: str, partition: int, flushes: list[StoredFlush],
                     committed: int | None) -> int | None:
    if flushes and not flushes[-1].stored_for_good(committed):
        _remove_flush(out, flushes.pop())
    return _reconcile(out, source, partition, flushes[-1].name.end + 1 if flushes else None, committed)


def table_resume_position(table: Table, source: str, partition: int, committed: int | None) -> int | None:
    """Where to resume reading a partition of a table: its next offset as the table's log says (a
    commit is atomic: no flush is ever incomplete). The log is the truth: a committed offset past it
    (a commit lost from the log, the table restored to an older version, or the offsets committed for
    another output) means offsets to read again, never to skip."""
    position = table.position(source, partition)
    data_end = table.data_end(source, partition)
    if position is not None and data_end is not None and data_end < position:
        logger.warning("partition %d of %s: %s's log says offsets up to %d are stored, but the data files it holds end "
                       "at offset %d (the table restored to an older version, or files taken out of its log): reading "
                       "offsets %d-%d again from the source", partition, source, table.url, position - 1, data_end - 1,
                       data_end, position - 1)
        position = data_end
    if committed is not None and committed > (position or 0):
        logger.warning("partition %d of %s: the committed offset %d is past where %s's log ends (offset %d): its log "
                       "lacks the commits of offsets %d-%d (a commit lost, the table restored to an older version, "
                       "or the offsets committed for another output); reading them again from the source",
                       partition, source, committed, table.url, position or 0, position or 0, committed - 1)
        return position
    return _reconcile(table.url, source, partition, position, committed)


def _reconcile(out: Path | str, source: str, partition: int, stored_end: int | None,
               committed: int | None) -> int | None:
    """The resume position, given where the stored data of a partition ends and its committed offset."""
    if committed is not None and committed > (stored_end or 0):
        raise MissingStoredFiles(
            f"partition {partition} of {source}: the committed offset {committed} is past the end of the files "
            f"stored in {out} (offset {stored_end or 0}): the files of offsets {stored_end or 0}-{committed - 1} "
            "are missing (deleted, or the offsets were committed for another output directory); nothing was "
            "removed. Restore them, or ingest into a new output directory (for Kafka, with a new consumer group)")
    if stored_end is None or committed == stored_end:
        return committed
    if committed is None:
        logger.warning("partition %d of %s has no committed offset (a new group, or its offsets were lost or "
                       "expired); resuming after the stored files, at offset %d", partition, source, stored_end)
    else:
        logger.warning("partition %d of %s: the committed offset %d is behind the stored files, which end at "
                       "offset %d (the commit of their flush was lost); resuming there", partition, source,
                       committed, stored_end)
    return stored_end


def recent_steps(out: Path | Table, source: str, partition: int, limit: int) -> OrderedDict[str, int]:
    """The event ids of the last ``limit`` or so steps the partition's files (of a tree, or committed
    to a table) hold, each with its offset, oldest first: what the ingester remembers to set aside a
    step sent again after a restart."""
    columns = ["log_offset", "event_id"]
    readers: list[Callable[[], pa.Table]]
    if isinstance(out, Table):
        stored = out
        named = [(name, file) for file in stored.files() if (name := FileName.parse(PurePosixPath(file.relative).name))
                 and name.source == source and name.partition == partition]
        named.sort(key=lambda item: (item[0].end, item[0].start, item[1].relative), reverse=True)
        readers = [partial(stored.read, file, columns) for _, file in named]
    else:
        flushes = _stored_flushes(out, source, {partition}).get(partition, [])
        readers = [partial(pq.read_table, path, columns=columns) for flush in reversed(flushes)
                   for path in reversed(flush.paths) if path.suffix == ".parquet"]
    steps: list[tuple[int, str]] = []
    for read in readers:
        if len(steps) >= limit:
            break
        table = read()
        pairs = table.group_by(["log_offset", "event_id"]).aggregate([])
        steps.extend(zip(pairs["log_offset"].to_pylist(), map(str, pairs["event_id"].to_pylist()), strict=True))
    steps.sort()
    return OrderedDict((event_id, offset) for offset, event_id in steps[-limit:])


def _stored_flushes(out: Path, source: str, partitions: set[int]) -> dict[int, list[StoredFlush]]:
    """Per partition, its flushes ordered by offset; stray temp files of these partitions are removed."""
    paths: dict[FileName, list[Path]] = defaultdict(list)
    for path in _readable(out):
        temp = path.name.startswith(".") and path.name.endswith(".tmp")
        name = FileName.parse(path.name[1:-4] if temp else path.name)
        if name is None or name.source != source or name.partition not in partitions:
            continue
        if temp:
            logger.warning("removing %s, left by a writer that was interrupted", path)
            path.unlink(missing_ok=True)
        elif ROLLUP_DIR not in path.relative_to(out).parts:
            paths[name].append(path)
    flushes: dict[int, list[StoredFlush]] = defaultdict(list)
    for name in sorted(paths, key=lambda n: (n.end, n.start)):
        flushes[name.partition].append(StoredFlush(name, sorted(paths[name])))
    return flushes


def _readable(out: Path) -> list[Path]:
    """The data, dead-letter and rollup files of the tree, temp files included."""
    return [*out.glob("dt=*/hour=*/*"), *(out / DEAD_LETTER_DIR).glob("*"), *(out / ROLLUP_DIR).glob("dt=*/hour=*/*")]


def _remove_flush(out: Path, flush: StoredFlush) -> None:
    """Remove a flush cut short by a crash, and the rollups a report may have built of its files."""
    rollups = [out / ROLLUP_DIR / path.relative_to(out) for path in flush.paths if path.suffix == ".parquet"]
    for path in [*flush.paths, *rollups]:
        path.unlink(missing_ok=True)
    logger.warning("removed %d file(s) of an incomplete flush (offsets %d-%d of partition %d), to be written again: %s",
                   len(flush.paths), flush.name.start, flush.name.end, flush.name.partition,
                   [str(p) for p in flush.paths])


def _flush_files(path: Path) -> int | None:
    """How many files the flush of ``path`` wrote, as the file records it (None: not recorded, or
    the file is not one the ingester wrote: readers and ``verify`` name such files)."""
    try:
        if path.suffix == ".parquet":
            metadata = pq.read_metadata(path).metadata or {}
            value: object = metadata.get(FLUSH_FILES_KEY.encode())
        else:
            with path.open("rb") as f:
                line = json.loads(f.readline())
            value = line.get(FLUSH_FILES_KEY) if isinstance(line, dict) else None
        return None if value is None else int(value)  # type: ignore[call-overload]
    except (OSError, ValueError, pa.ArrowInvalid):
        return None
