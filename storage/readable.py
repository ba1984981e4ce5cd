"""Which files of an output tree are the ingester's: every reader takes these and no others.

A data file is read when all of these hold (the footer is read, never the rows):

1. its path is ``dt=YYYY-MM-DD/hour=HH/<source>-<partition>-<first>-<last>.parquet``
   (:class:`storage.layout.FileName`) with a real date and hour;
2. its schema is the stored table's (:data:`schemas.arrow.REQUEST_STEP_SCHEMA`) or an older minor
   version's (the same without the columns later ones added, :data:`schemas.arrow.ADDED_COLUMNS`);
3. its column statistics place its rows there: every ``event_time`` in the folder's hour,
   ``log_partition`` the name's partition, every ``log_offset`` from the name's first to last
   offset (a copy into another hour folder, or renamed to other offsets, fails this);
4. of files with the same rows (equal row count and equal minimum and maximum of
   ``event_id``, ``event_time`` and ``log_offset``: a copy, say under another source's name),
   one is read: the one whose source and partition hold more flushes (a copy under another
   source's name is usually alone there), then the first by path;
5. of flushes of one source and partition whose offset ranges overlap, the one with the most
   rows is read (then the narrower range, then the earlier); a flush is the files of one name.

Of a table (:mod:`storage.table`), the data files are those its log names, and no others; one
missing, or not of the size its commit recorded, is left out with the reason.

A rollup (``_rollup/`` + a data file's path) is read when its name is one the ingester writes,
its schema is a rollup's, and its data file is not left out. Every file left out is named with
the reason, for the readers to warn about and for ``specmetrics verify`` to list.
"""

from __future__ import annotations

import base64
import bisect
import logging
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
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from specmetrics.schemas.arrow import ADDED_COLUMNS, REQUEST_STEP_SCHEMA, schema_before
from specmetrics.schemas.version import SCHEMA_VERSION
from specmetrics.storage.files import list_folder
from specmetrics.storage.layout import ROLLUP_DIR, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import Table, TableFile, is_table

logger = logging.getLogger(__name__)
T = TypeVar("T")
K = TypeVar("K")

#: The stored schemas a data file may have: the current one, then each older one, newest first.
DATA_SCHEMAS: tuple[pa.Schema, ...] = tuple(
    schema.remove_metadata()
    for schema in (REQUEST_STEP_SCHEMA, *(schema_before(version) for version in reversed(ADDED_COLUMNS))))
_PARTITION = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})/hour=(\d{2})$")
_FOOTER_THREADS = 4  # a footer read waits on the disk: threads overlap that where files are not cached
_STATS_COLUMNS = ("event_id", "event_time", "log_partition", "log_offset")
_HOUR = timedelta(hours=1)
#: Footers and rollup schemas already read, by (path, inode, size, modification time), and
#: stored Arrow schemas already compared: a report selects the files of its window several times.
_FOOTERS: dict[tuple[Path, int, int, int], _Footer | str] = {}
_ROLLUP_SCHEMAS: dict[tuple[Path, int, int, int], str | None] = {}
#: The same for a table's rollups on S3, by (table, path under it, size, modification time).
_OBJECT_SCHEMAS: dict[tuple[str, str, int, float], str | None] = {}
_CACHED_FILES = 200_000
_SCHEMAS: dict[bytes, str | None] = {}
_GONE = "removed while the tree was read"


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A file of the tree that readers do not read (``path`` relative to the tree)."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReadableFiles:
    """The files readers take (absolute paths, sorted) and those they leave out."""

    data: tuple[Path, ...]
    rollups: tuple[Path, ...]
    left_out: tuple[LeftOut, ...]

    def warn(self) -> None:
        """Log a warning for each file left out."""
        for file in self.left_out:
            logger.warning("left out %s: %s", file.path, file.reason)


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


def select_files(root: Path, since: datetime | None = None, until: datetime | None = None,
                 rollup_schema: pa.Schema | None = None) -> ReadableFiles:
    """The data files (of the days from ``since`` to ``until``) readers take from the tree
    ``root``, and the rollups when ``rollup_schema`` is given (see the module's rules). Of a
    table (:mod:`storage.table`), the data files are those its log holds, and nothing else."""
    left_out: list[LeftOut] = []
    table = is_table(root)
    if table:
        data = []
        for file in Table(root).files(since, until):
            if (damage := file.damage()) is None:
                data.append(file.path)
            else:
                left_out.append(LeftOut(_relative(root, file.path), damage))
    else:
        footers = _read_footers(root, partition_files(root, since, until), left_out)
        data = _without_copies(root, footers, left_out)
    rollups: list[Path] = []
    if rollup_schema is not None:
        rejected = {root / f.path for f in left_out}
        # Of a table, a rollup of a file the log does not hold (any more: compacted) is not read, as that file.
        kept = set(data) if table else None
        rollups = _rollups(root, since, until, rollup_schema.remove_metadata(), rejected, left_out, kept)
    return ReadableFiles(tuple(sorted(data)), tuple(sorted(rollups)), tuple(sorted(left_out, key=lambda f: f.path)))


@dataclass(frozen=True, slots=True)
class ReadableObjects:
    """The objects readers take from a table on S3: the data files its log holds and rollups (paths
    under the prefix, sorted), and the rollups left out."""

    files: tuple[TableFile, ...]  # by path
    rollups: tuple[str, ...]
    left_out: tuple[LeftOut, ...]

    @property
    def data(self) -> tuple[str, ...]:
        """The data files' paths under the prefix."""
        return tuple(file.relative for file in self.files)

    def warn(self) -> None:
        """Log a warning for each rollup left out."""
        for file in self.left_out:
            logger.warning("left out %s: %s", file.path, file.reason)


def select_objects(location: S3Location, since: datetime | None = None, until: datetime | None = None,
                   rollup_schema: pa.Schema | None = None) -> ReadableObjects:
    """Of the table at ``location``: the data files its log holds (of the days from ``since`` to
    ``until``), and with ``rollup_schema`` the rollups of those files that have a rollup's schema.
    A rollup of a file the log does not hold (any more: compacted) is passed over."""
    if not is_table(location):
        raise FileNotFoundError(f"{location.url} holds no table: point at the output of 'specmetrics ingest --out "
                                f"{location.url}'")
    files = tuple(sorted(Table(location).files(since, until), key=lambda file: file.relative))
    rollups: list[str] = []
    left_out: list[LeftOut] = []
    if rollup_schema is not None:
        present = {file.relative: file for file in list_folder(location, ROLLUP_DIR, recursive=True)}
        schema = rollup_schema.remove_metadata()
        for file in files:
            if (listed := present.get(rollup := f"{ROLLUP_DIR}/{file.relative}")) is None:
                continue
            # An object is replaced whole: the same size and time, the same schema (a report selects
            # its window's objects several times, and each schema read is a request to the store).
            difference = _cached(_OBJECT_SCHEMAS, (location.url, rollup, listed.size, listed.mtime_s), partial(
                _rollup_schema_difference, location.key(rollup), schema, location.filesystem()))
            if difference is None:
                rollups.append(rollup)
            else:
                left_out.append(LeftOut(rollup, difference))
    return ReadableObjects(files, tuple(rollups), tuple(left_out))


def partition_files(root: Path, since: datetime | None, until: datetime | None) -> list[Path]:
    """The Parquet files of the days from ``since`` to ``until`` in ``root``'s partition folders."""
    def in_window(day: Path) -> bool:
        date = day.name.removeprefix("dt=")
        return (since is None or date >= f"{since:%Y-%m-%d}") and (until is None or date <= f"{until:%Y-%m-%d}")

    return sorted(path for day in root.glob("dt=*") if in_window(day) for path in day.glob("hour=*/*.parquet")
                  if path.is_file())


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


def _once(cache: dict[tuple[Path, int, int, int], T], path: Path, read: Callable[[Path], T], gone: T) -> T:
    """``read(path)``, or what it gave before: files are immutable once in place, so a
    result is taken again while the file's inode, size and modification time are the same."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return gone
    return _cached(cache, (path, stat.st_ino, stat.st_size, stat.st_mtime_ns), partial(read, path))


def _cached(cache: dict[K, T], key: K, read: Callable[[], T]) -> T:
    """``cache[key]``, from ``read()`` the first time."""
    if key not in cache:
        if len(cache) >= _CACHED_FILES:  # a long-running process: files removed since stay here
            cache.clear()
        cache[key] = read()
    return cache[key]


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
    ranges = _column_ranges(metadata)
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


def _column_ranges(metadata: pq.FileMetaData) -> dict[str, tuple[object, object]]:
    """Minimum and maximum of each checked column over all row groups, where every row group has them."""
    names = metadata.schema.names
    ranges: dict[str, tuple[object, object]] = {}
    for column in _STATS_COLUMNS:
        stats = [metadata.row_group(g).column(names.index(column)).statistics for g in range(metadata.num_row_groups)]
        if all(s is not None and s.has_min_max for s in stats):
            ranges[column] = (min(s.min for s in stats), max(s.max for s in stats))
    return ranges


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


def _rollups(root: Path, since: datetime | None, until: datetime | None, schema: pa.Schema,
             rejected: set[Path], left_out: list[LeftOut], kept: set[Path] | None) -> list[Path]:
    """The rollups with an ingester's name and a rollup's schema whose data file is not ``rejected``
    (and is in ``kept``, where given: others are passed over, not left out)."""
    rollups = []
    for path in partition_files(root / ROLLUP_DIR, since, until):
        relative = path.relative_to(root).as_posix()
        data_file = root / path.relative_to(root / ROLLUP_DIR)
        if kept is not None and data_file not in kept:
            continue
        place = _place(root / ROLLUP_DIR, path)
        if isinstance(place, str):
            left_out.append(LeftOut(relative, place))
        elif data_file in rejected:
            left_out.append(LeftOut(relative, "its data file is left out"))
        elif (difference := _once(_ROLLUP_SCHEMAS, path, partial(_rollup_schema_difference, schema=schema),
                                  _GONE)) is _GONE:
            continue
        elif difference is not None:
            left_out.append(LeftOut(relative, difference))
        else:
            rollups.append(path)
    return rollups


def _rollup_schema_difference(path: Path | str, schema: pa.Schema,
                              filesystem: pafs.FileSystem | None = None) -> str | None:
    try:
        stored = pq.read_schema(path, filesystem=filesystem).remove_metadata()
    except (OSError, pa.ArrowException) as exc:
        return f"not a readable Parquet file ({exc})"
    return None if stored.equals(schema) else f"not a rollup's schema: {schema_difference(stored, schema)}"


def schema_difference(found: pa.Schema, expected: pa.Schema) -> str:
    """How ``found`` differs from ``expected``, in a few words."""
    if len(found) > len(expected) and all(found.field(i).equals(expected.field(i)) for i in range(len(expected))):
        # every column this version writes, in order, then more: what a later minor version writes
        return (f"written by a newer specmetrics (columns this one, schema {SCHEMA_VERSION}, does not know: "
                f"{', '.join(found.names[len(expected):])}): upgrade specmetrics to read it")
    names, wanted = set(found.names), set(expected.names)
    parts = []
    if missing := [n for n in expected.names if n not in names]:
        parts.append("missing " + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""))
    if extra := [n for n in found.names if n not in wanted]:
        parts.append("unexpected " + ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else ""))
    for field in found:
        if field.name in wanted and not field.equals(other := expected.field(field.name)):
            parts.append(f"{field.name} is {_describe(field)}, not {_describe(other)}")
    if not parts and found.names != expected.names:
        parts.append("the columns are in another order")
    return "; ".join(parts[:4]) or "differs"


def _describe(field: pa.Field) -> str:
    return f"{field.type}{'' if field.nullable else ' not null'}"

