"""Which files of a tree count: the rules ``specmetrics table convert`` applies once, to commit them.

A tree is the layout before tables: data files in ``dt=/hour=`` folders and no log, so what
counted was decided from the files themselves. A data file counts when all of these hold (the
footer is read, never the rows):

1. its path is ``dt=YYYY-MM-DD/hour=HH/<source>-<partition>-<first>-<last>.parquet``
   (:class:`storage.layout.FileName`) with a real date and hour;
2. its schema is the stored table's (:data:`schemas.arrow.REQUEST_STEP_SCHEMA`) or an older minor
   version's (the same without the columns later ones added, :data:`schemas.arrow.ADDED_COLUMNS`);
3. its column statistics place its rows there: every ``event_time`` in the folder's hour,
   ``log_partition`` the name's partition, every ``log_offset`` from the name's first to last
   offset (a copy into another hour folder, or renamed to other offsets, fails this);
4. of files with the same rows (equal row count and equal minimum and maximum of
   ``event_id``, ``event_time`` and ``log_offset``: a copy, say under another source's name),
   one counts: the one whose source and partition hold more flushes (a copy under another
   source's name is usually alone there), then the first by path;
5. of flushes of one source and partition whose offset ranges overlap, the one with the most
   rows counts (then the narrower range, then the earlier); a flush is the files of one name.

Every file left out is named with the reason.
"""

from __future__ import annotations

import base64
import bisect
import json
import re
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from specmetrics.schemas.arrow import ADDED_COLUMNS, REQUEST_STEP_SCHEMA, schema_before
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, FLUSH_FILES_KEY, FileName
from specmetrics.storage.parquet import FileStats, column_ranges
from specmetrics.storage.readable import LeftOut, cached, partition_files, schema_difference

T = TypeVar("T")

#: The stored schemas a data file may have: the current one, then each older one, newest first.
DATA_SCHEMAS: tuple[pa.Schema, ...] = tuple(
    schema.remove_metadata()
    for schema in (REQUEST_STEP_SCHEMA, *(schema_before(version) for version in reversed(ADDED_COLUMNS))))
_FOOTER_THREADS = 4  # a footer read waits on the disk: threads overlap that where files are not cached
_STATS_COLUMNS = ("event_id", "event_time", "log_partition", "log_offset")
_HOUR = timedelta(hours=1)
#: Footers already read, by (path, inode, size, modification time), and stored Arrow schemas already compared.
_FOOTERS: dict[tuple[Path, int, int, int], _Footer | str] = {}
_SCHEMAS: dict[bytes, str | None] = {}
_GONE = "removed while the tree was read"
_PARTITION = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})/hour=(\d{2})$")


@dataclass(frozen=True, slots=True)
class _Footer:
    """What a data file's footer says: its rows and the range of the columns checked."""

    path: Path
    name: FileName
    hour: datetime
    rows: int
    ranges: dict[str, tuple[object, object]]

    @property
    def fingerprint(self) -> tuple[object, ...]:
        return (self.rows, *(self.ranges.get(c) for c in ("event_id", "event_time", "log_offset")))


def _place(root: Path, path: Path) -> tuple[FileName, datetime] | str:
    """The name and partition hour of a data file's path, or why they are not the ingester's."""
    name = FileName.parse(path.name)
    if name is None or not path.name.endswith(".parquet"):
        return "not a name the ingester writes (<source>-<partition>-<first offset>-<last offset>.parquet)"
    folder = _PARTITION.match(path.parent.relative_to(root).as_posix())
    try:
        hour = datetime.fromisoformat(f"{folder[1]}T{folder[2]}:00") if folder else None
    except ValueError:
        hour = None
    if hour is None:
        return "not in a dt=YYYY-MM-DD/hour=HH folder with a real date and hour"
    return name, hour


def _once(cache: dict[tuple[Path, int, int, int], T], path: Path, read: Callable[[Path], T], gone: T) -> T:
    """``read(path)``, or what it gave before: files are immutable once in place, so a
    result is taken again while the file's inode, size and modification time are the same."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return gone
    return cached(cache, (path, stat.st_ino, stat.st_size, stat.st_mtime_ns), partial(read, path))


def tree_files(root: Path) -> tuple[list[Path], list[LeftOut]]:
    """The data files of the tree ``root`` that count (see the module's rules), sorted, and those
    left out, by path."""
    left_out: list[LeftOut] = []
    footers = _read_footers(root, sorted(map(Path, partition_files(root))), left_out)
    data = _without_copies(root, footers, left_out)
    return sorted(data), sorted(left_out, key=lambda f: f.path)


def footer_stats(root: Path, path: Path) -> FileStats:
    """The statistics of a data file of the tree ``root``, from the footer :func:`tree_files` read
    (read now where it has not)."""
    footer = _footer(root, path)
    return FileStats.bounded(footer.rows, footer.ranges) if isinstance(footer, _Footer) else FileStats.read(path)


def _read_footers(root: Path, paths: list[Path], left_out: list[LeftOut]) -> list[_Footer]:
    """The footers of the files that pass rules 1 to 3; the others go to ``left_out``."""
    with ThreadPoolExecutor(_FOOTER_THREADS) as pool:
        results = list(pool.map(lambda path: _footer(root, path), paths))
    footers = []
    for path, result in zip(paths, results, strict=True):
        if result is _GONE:  # the ingester removed an uncommitted flush meanwhile: not a finding
            continue
        if isinstance(result, str):
            left_out.append(LeftOut(path.relative_to(root).as_posix(), result))
        else:
            footers.append(result)
    return footers


def _footer(root: Path, path: Path) -> _Footer | str:
    """The footer of a data file that passes rules 1 to 3, or why it does not."""
    return _once(_FOOTERS, path, partial(_read_footer, root), _GONE)


def _read_footer(root: Path, path: Path) -> _Footer | str:
    place = _place(root, path)
    if isinstance(place, str):
        return place
    name, hour = place
    try:
        metadata = pq.read_metadata(path)
        difference = _schema_difference(metadata)
    except (OSError, pa.ArrowException) as exc:
        return f"not a readable Parquet file ({exc})"
    if difference is not None:
        return f"not the stored table's schema: {difference}"
    ranges = column_ranges(metadata, _STATS_COLUMNS)
    if metadata.num_rows and len(ranges) < len(_STATS_COLUMNS):
        return "its footer has no statistics of " + ", ".join(c for c in _STATS_COLUMNS if c not in ranges)
    footer = _Footer(path, name, hour, metadata.num_rows, ranges)
    misplaced = _misplaced(footer) if metadata.num_rows else None
    return misplaced or footer


def _schema_difference(metadata: pq.FileMetaData) -> str | None:
    """How a file's Arrow schema differs from every one of :data:`DATA_SCHEMAS`, or None; decided once
    per distinct stored schema."""
    stored = (metadata.metadata or {}).get(b"ARROW:schema")
    if stored is None:  # not written by Arrow: its types are Parquet's alone
        return _difference(metadata.schema.to_arrow_schema())
    if stored not in _SCHEMAS:
        _SCHEMAS[stored] = _difference(pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored))))
    return _SCHEMAS[stored]


def _difference(schema: pa.Schema) -> str | None:
    schema = schema.remove_metadata()
    if any(schema.equals(expected) for expected in DATA_SCHEMAS):
        return None
    return schema_difference(schema, DATA_SCHEMAS[0])


def _misplaced(footer: _Footer) -> str | None:
    """Why the rows cannot be of the file's place (rule 3), if they cannot."""
    (first_time, last_time), (low, high) = footer.ranges["event_time"], footer.ranges["log_partition"]
    first_offset, last_offset = footer.ranges["log_offset"]
    name = footer.name
    # last_time - hour, not hour + 1 h: the hour 9999-12-31 23:00 has no end datetime can hold
    if not (footer.hour <= first_time and last_time - footer.hour < _HOUR):  # type: ignore[operator]
        return (f"its rows' event times ({first_time} to {last_time}) lie outside its folder's hour "
                f"({footer.hour:%Y-%m-%d %H}:00): a copy from another folder?")
    if not low == high == name.partition:
        return f"its rows' log_partition ({low} to {high}) is not the partition of its name ({name.partition})"
    if not (name.start <= first_offset and last_offset <= name.end):  # type: ignore[operator]
        return (f"its rows' offsets ({first_offset} to {last_offset}) lie outside the offsets of its name "
                f"({name.start} to {name.end})")
    return None


def _without_copies(root: Path, footers: list[_Footer], left_out: list[LeftOut]) -> list[Path]:
    """Rules 4 and 5: the files left when copies and overlapping flushes are taken out."""
    flushes_of: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
    for footer in footers:
        flushes_of[footer.name.source, footer.name.partition].add((footer.name.start, footer.name.end))
    seen: dict[tuple[object, ...], Path] = {}
    unique: list[_Footer] = []
    # Of equal files the one among more flushes of its source and partition is kept: a copy put
    # under another source's name is usually alone there.
    for footer in sorted(footers, key=lambda f: (-len(flushes_of[f.name.source, f.name.partition]), f.path)):
        original = seen.setdefault(footer.fingerprint, footer.path) if footer.rows else footer.path
        if original != footer.path:
            left_out.append(LeftOut(_relative(root, footer.path),
                                    f"the same rows as {_relative(root, original)}: a copy"))
        else:
            unique.append(footer)
    rows: dict[tuple[str, int, int, int], int] = defaultdict(int)
    for footer in unique:
        rows[_flush(footer)] += footer.rows
    kept = _kept_flushes(rows)
    data = []
    for footer in unique:
        source, partition, start, end = _flush(footer)
        if (source, partition, start, end) in kept:
            data.append(footer.path)
            continue
        other = next(f"{s}-{e}" for k, p, s, e in kept if (k, p) == (source, partition) and s <= end and start <= e)
        left_out.append(LeftOut(_relative(root, footer.path),
                                f"its offsets {start}-{end} overlap the flush {other} of {source} partition "
                                f"{partition}, which is read instead"))
    return data


def _flush(footer: _Footer) -> tuple[str, int, int, int]:
    return footer.name.source, footer.name.partition, footer.name.start, footer.name.end


def _kept_flushes(rows: dict[tuple[str, int, int, int], int]) -> set[tuple[str, int, int, int]]:
    """Rule 5: flushes with more rows first (then the narrower, then the earlier), each kept
    unless it overlaps a kept one of its source and partition."""
    kept: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)  # disjoint, by start
    for source, partition, start, end in sorted(rows, key=lambda f: (-rows[f], f[3] - f[2], f[2], f)):
        spans = kept[source, partition]
        at = bisect.bisect(spans, (start, end))
        if (at == 0 or spans[at - 1][1] < start) and (at == len(spans) or end < spans[at][0]):
            spans.insert(at, (start, end))
    return {(source, partition, start, end) for (source, partition), spans in kept.items() for start, end in spans}


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


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

    @property
    def complete(self) -> bool:
        """Every file the flush wrote is there (as far as its files say)."""
        recorded = self.recorded_files
        return recorded is None or len(self.paths) >= recorded


def stored_flushes(out: Path) -> list[StoredFlush]:
    """The flushes of the tree ``out`` (its data and dead-letter files by name), by source,
    partition and offsets."""
    paths: dict[FileName, list[Path]] = defaultdict(list)
    for path in [*out.glob(DATA_GLOB), *(out / DEAD_LETTER_DIR).glob("*.jsonl")]:
        name = FileName.parse(path.name)
        if name is not None:
            paths[name].append(path)
    return [StoredFlush(name, sorted(paths[name]))
            for name in sorted(paths, key=lambda n: (n.source, n.partition, n.start, n.end))]


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
