"""Which files of a table readers take: the data files its log names, and no others.

Of a table (:mod:`storage.table`), a data file missing, or not of the size its commit recorded, is
left out with the reason. A folder of Parquet files without a table's log (a tree written before
tables) is not read: readers name ``specmetrics table convert``, which makes it a table once
(:mod:`storage.tree` says which of its files count).

A rollup (``_rollup/`` + a data file's path) is read when its name is one the ingester writes,
its schema is a rollup's, and its data file is read. Every file left out is named with the reason,
for the readers to warn about and for ``specmetrics verify`` to list.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from specmetrics.schemas.version import SCHEMA_VERSION
from specmetrics.storage.files import list_folder
from specmetrics.storage.layout import ROLLUP_DIR, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import Table, TableFile, is_table

logger = logging.getLogger(__name__)
T = TypeVar("T")
K = TypeVar("K")

_PARTITION = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})/hour=(\d{2})$")
#: Rollup schemas already read, by (path, inode, size, modification time): a report selects the
#: files of its window several times.
_ROLLUP_SCHEMAS: dict[tuple[Path, int, int, int], str | None] = {}
#: The same for a table's rollups on S3, by (table, path under it, size, modification time).
_OBJECT_SCHEMAS: dict[tuple[str, str, int, float], str | None] = {}
_CACHED_FILES = 200_000
_GONE = "removed while the folder was read"


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A file of the table that readers do not read (``path`` relative to the table)."""

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


class NotATable(ValueError):
    """A folder of Parquet files without a table's log: a tree written before tables."""

    def __init__(self, root: Path) -> None:
        super().__init__(f"{root} holds a tree of Parquet files, not a Delta table (the layout before tables): "
                         f"'specmetrics table convert --data {root}' makes it a table in place")


def select_files(root: Path, since: datetime | None = None, until: datetime | None = None,
                 rollup_schema: pa.Schema | None = None) -> ReadableFiles:
    """The data files (of the days from ``since`` to ``until``) of the table ``root``, and the
    rollups when ``rollup_schema`` is given (see the module docstring); nothing of a folder that is
    missing or holds no data folder yet. :class:`NotATable` for a tree."""
    if not is_table(root):
        if any(root.glob("dt=*")):
            raise NotATable(root)
        return ReadableFiles((), (), ())
    left_out: list[LeftOut] = []
    data = []
    for file in Table(root).files(since, until):
        if (damage := file.damage()) is None:
            data.append(file.path)
        else:
            left_out.append(LeftOut(file.path.relative_to(root).as_posix(), damage))
    rollups: list[Path] = []
    if rollup_schema is not None:
        # a rollup of a file the log does not hold (any more: compacted) is not read, as that file
        rollups = _rollups(root, since, until, rollup_schema.remove_metadata(), set(data), left_out)
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
            difference = cached(_OBJECT_SCHEMAS, (location.url, rollup, listed.size, listed.mtime_s), partial(
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


def place_of(root: Path, path: Path) -> tuple[FileName, datetime] | str:
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


def once(cache: dict[tuple[Path, int, int, int], T], path: Path, read: Callable[[Path], T], gone: T) -> T:
    """``read(path)``, or what it gave before: files are immutable once in place, so a
    result is taken again while the file's inode, size and modification time are the same."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return gone
    return cached(cache, (path, stat.st_ino, stat.st_size, stat.st_mtime_ns), partial(read, path))


def cached(cache: dict[K, T], key: K, read: Callable[[], T]) -> T:
    """``cache[key]``, from ``read()`` the first time."""
    if key not in cache:
        if len(cache) >= _CACHED_FILES:  # a long-running process: files removed since stay here
            cache.clear()
        cache[key] = read()
    return cache[key]


def _rollups(root: Path, since: datetime | None, until: datetime | None, schema: pa.Schema, kept: set[Path],
             left_out: list[LeftOut]) -> list[Path]:
    """The rollups with an ingester's name and a rollup's schema whose data file is ``kept`` (others
    are passed over, not left out)."""
    rollups = []
    for path in partition_files(root / ROLLUP_DIR, since, until):
        relative = path.relative_to(root).as_posix()
        if root / path.relative_to(root / ROLLUP_DIR) not in kept:
            continue
        place = place_of(root / ROLLUP_DIR, path)
        if isinstance(place, str):
            left_out.append(LeftOut(relative, place))
        elif (difference := once(_ROLLUP_SCHEMAS, path, partial(_rollup_schema_difference, schema=schema),
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

