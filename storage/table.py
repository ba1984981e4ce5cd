"""The output as a Delta Lake table: a transaction log beside the data decides which files count.

::

    DATADIR/_delta_log/<version>.json        the log: each commit adds the files of one flush
    DATADIR/dt=YYYY-MM-DD/hour=HH/<source>-<partition>-<first>-<last>.<attempt>.parquet

A table is the tree of :mod:`storage.layout` with a log: data files are named and placed the same
way (each write attempt of a flush with its own ``attempt`` token, so a writer that lost the
partition never writes over a file another committed), dead letters and rollups lie where they
lie in a tree. What differs is the truth:

* a data file counts only once a commit names it; a file no commit names (a crashed or refused
  writer's, or one dropped into the folders by hand) is never read;
* each flush is one commit, carrying its source partition's next offset as the Delta
  application transaction ``specmetrics/<source>/<partition>``. A commit is refused unless the
  table's offset for the partition is where the flush starts (or the partition has none): two
  writers of one partition cannot both commit the same offsets, and the writer that resumes
  reads where to from the log, never from file names;
* a dead-letter file counts when the commit of its flush names a data file of the same offsets
  (every flush of a table commits at least one data file, without rows where it had none), or
  when another engine's OPTIMIZE rewrote that data file (:meth:`Table.committed_letters`);
* each add action carries the file's statistics (:class:`FileStats`: rows, and the bounds of its
  event times and offsets), by which readers skip files outside a time window unopened.

``deltalake`` (delta-rs) writes and reads the log; Spark, Trino, DuckDB or Polars read the
table as any Delta table (``dt`` and ``hour`` are its partition columns).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)

from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.storage.damage import LOG_DIR, StoreDamaged, file_damage, log_damage, one_line, os_errno, size_damage
from specmetrics.storage.files import list_folder, remove
from specmetrics.storage.layout import DEAD_LETTER_DIR, ROLLUP_DIR, FileName
from specmetrics.storage.location import S3Location, address, located, store_error
from specmetrics.storage.parquet import MS, FileStats

logger = logging.getLogger(__name__)

PARTITION_BY = ["dt", "hour"]
#: The table's columns: the stored steps, then the partition keys (which the data files do not hold).
TABLE_SCHEMA = pa.schema([*REQUEST_STEP_SCHEMA.remove_metadata(), pa.field("dt", pa.string()),
                          pa.field("hour", pa.string())])


class CommitRefused(RuntimeError):
    """The table holds offsets of the partition past where the flush starts: another writer
    committed them (this one was evicted, or the partition was resumed elsewhere)."""

    def __init__(self, message: str, position: int | None) -> None:
        super().__init__(message)
        self.position = position  # the partition's next offset, as the table says now


class ReplaceRefused(ValueError):
    """Files a replacement would remove are no longer in the table (another ``table optimize`` merged
    them, or another writer removed them), or other writers kept committing first: nothing was committed."""


#: How long a flush's files may lie before its commit names them (an ingester writes them first): files
#: no commit names that are younger may be in flight, older ones are a writer's that died or a lost commit's.
IN_FLIGHT_HOURS = 1.0

#: How often a replacement is tried again when another writer committed first (ingesters commit often).
REPLACE_ATTEMPTS = 20
#: Footers read at once where the log lacks a file's statistics.
FOOTER_THREADS = 8


@dataclass(frozen=True, slots=True)
class DataFile:
    """A data file to commit: its path under the table's root (``dt=…/hour=…/<name>``), size and
    statistics."""

    relative: str
    size: int
    stats: FileStats

    @classmethod
    def local(cls, root: Path, path: Path, stats: FileStats | None = None) -> DataFile:
        """A data file written under the local folder ``root``, with ``stats`` (read from its footer
        where not given)."""
        return cls(path.relative_to(root).as_posix(), path.stat().st_size,
                   FileStats.read(path) if stats is None else stats)


@dataclass(frozen=True, slots=True)
class TableFile:
    """A data file a commit names: where it is (an absolute path, or an ``s3://`` URL), its path
    under the table's root, size in bytes, partition values and, when its commit recorded them,
    its rows, the first and last ``event_time`` (to the millisecond, as Delta keeps them), the
    least and greatest ``log_partition`` and the greatest ``log_offset``."""

    location: str
    relative: str
    size: int
    dt: str
    hour: str
    rows: int | None = None
    first_event: datetime | None = None
    last_event: datetime | None = None
    partitions: tuple[int, int] | None = None
    last_offset: int | None = None

    @property
    def recorded(self) -> tuple[int | None, datetime | None, datetime | None]:
        """What its commit recorded of it: rows, first and last event time."""
        return self.rows, self.first_event, self.last_event

    def may_hold(self, since: datetime | None, until: datetime | None) -> bool:
        """Whether rows of the file may lie in ``since <= event_time < until``, as its statistics
        tell (without them: yes). A writer other than specmetrics may have rounded the last time
        down to the millisecond, so a millisecond is added to it. Times without a zone are UTC."""
        if self.first_event is None or self.last_event is None:
            return True
        since, until = (t if t is None or t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)
                        for t in (since, until))
        return (since is None or since - self.last_event < MS) and (until is None or self.first_event < until)

    def may_hold_partition(self, partition: int) -> bool:
        """Whether rows of the source partition ``partition`` may lie in the file, as its statistics
        tell (without them: yes)."""
        return self.partitions is None or self.partitions[0] <= partition <= self.partitions[1]

    @property
    def path(self) -> Path:
        """The file of a local table."""
        return Path(self.location)

    def damage(self) -> str | None:
        """What is wrong with the file as it lies on disk (None: there, with the committed size)."""
        try:
            found: int | None = self.path.stat().st_size
        except FileNotFoundError:
            found = None
        return size_damage(found, self.size)


def by_name(files: Iterable[TableFile]) -> tuple[dict[FileName, list[TableFile]], list[TableFile]]:
    """Committed data files by the flush their name says (a flush across hours has a file in each hour
    folder), and those whose name says none (another application wrote them)."""
    named: dict[FileName, list[TableFile]] = defaultdict(list)
    foreign = []
    for file in files:
        name = FileName.parse(PurePosixPath(file.relative).name)
        if name is None:
            foreign.append(file)
        else:
            named[name].append(file)
    return named, foreign


def is_table(root: Path | S3Location) -> bool:
    """Whether ``root`` holds a table (a transaction log), not a plain tree."""
    if isinstance(root, S3Location):
        try:
            return bool(DeltaTable.is_deltatable(root.url, root.storage_options()))
        except (DeltaError, OSError) as exc:
            raise store_error(root, exc) from None
    return (root / LOG_DIR).is_dir()


def app_id(source: str, partition: int) -> str:
    """The application transaction id under which the table keeps a source partition's next offset."""
    return f"specmetrics/{source}/{partition}"


def identity_app_id(source: str) -> str:
    """The application transaction id under which the table keeps which log a source name stands for."""
    return f"specmetrics/{source}/identity"


def fingerprint(identity: str) -> int:
    """A source's identity as an application transaction's version (56 bits of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(identity.encode()).digest()[:7], "big")


def create_table(root: Path, files: Sequence[DataFile], positions: dict[tuple[str, int], int]) -> None:
    """Make ``root`` a table whose first commit names ``files`` and sets each (source, partition)'s
    next offset: all of it or, when the commit fails, nothing."""
    actions = [_add(file, int(time.time_ns() // 1_000_000)) for file in files]
    create_table_with_add_actions(
        str(root), Schema.from_arrow(TABLE_SCHEMA), actions, mode="error", partition_by=PARTITION_BY,
        name="request_outcomes",
        commit_properties=CommitProperties(app_transactions=[Transaction(app_id(source, partition), position)
                                                             for (source, partition), position in positions.items()]))


def _add(file: DataFile, now_ms: int, data_change: bool = True) -> AddAction:
    """The action that adds ``file``; ``data_change`` False: rows that were in the table already (a compaction)."""
    dt, hour = (part.split("=", 1)[1] for part in file.relative.split("/")[:2])
    return AddAction(file.relative, file.size, {"dt": dt, "hour": hour}, now_ms, data_change, file.stats.json())


class Table:
    """One Delta table of stored steps, opened (or created empty) at ``root``: a local folder, or
    ``s3://bucket/prefix`` (:class:`storage.location.S3Location`)."""

    def __init__(self, root: Path | S3Location, create: bool = False) -> None:
        self.root = root
        if isinstance(root, S3Location):
            self.url, self._options = root.url, root.storage_options()
        else:
            self.url, self._options = str(root), {}
        try:
            if create and not is_table(root):
                if isinstance(root, Path):
                    root.mkdir(parents=True, exist_ok=True)
                try:
                    DeltaTable.create(self.url, TABLE_SCHEMA, mode="ignore", partition_by=PARTITION_BY,
                                      name="request_outcomes", storage_options=self._options or None)
                except DeltaError:
                    if not is_table(root):
                        raise
                    # another writer created it at the same moment
            self._delta = DeltaTable(self.url, storage_options=self._options or None)
            self._check_foreign()
            if create:
                self._add_new_columns()
        except DeltaError as exc:
            if not create and not is_table(root):
                raise FileNotFoundError(f"{self.url} holds no table: point at the output of 'specmetrics ingest "
                                        f"--out {self.url}'") from None
            raise self._failed(exc) from None
        except OSError as exc:
            if isinstance(root, S3Location):
                raise store_error(root, exc) from None
            raise

    def _check_foreign(self) -> None:
        """A Delta table another application wrote (other partition columns, or without the contract's
        first columns) is refused in one line before anything reads or writes it."""
        partitions = list(self._delta.metadata().partition_columns)
        have = {field.name for field in self._delta.schema().fields}
        needed = [name for name in ("event_id", "engine_id", "request_id", "kind", "event_time") if name not in have]
        if partitions != list(PARTITION_BY) or needed:
            what = f"partitioned by {', '.join(partitions) or 'nothing'}, not {', '.join(PARTITION_BY)}" \
                if partitions != list(PARTITION_BY) else f"without the columns {', '.join(needed)}"
            raise ValueError(f"{self.url} holds a Delta table another application wrote ({what}): not a table of step "
                             "events; use another output")

    def _add_new_columns(self) -> None:
        """Add to the table's schema the columns later minor versions of the contract added (a table
        made before schema 1.5 has no ``seq_len``), so that engines reading the table by its schema
        see them; rows committed before read them as null."""
        for _ in range(3):  # another writer may add them at the same moment: its commit then wins
            have = {field.name for field in self._delta.schema().fields}
            missing = [field for field in Schema.from_arrow(TABLE_SCHEMA).fields if field.name not in have]
            if not missing:
                return
            try:
                self._delta.alter.add_columns(missing)
                logger.info("%s: added the columns %s to the table's schema", self.url,
                            ", ".join(field.name for field in missing))
                return
            except CommitFailedError:
                self._delta.update_incremental()

    def _refresh(self) -> None:
        """Read the log's entries since the last read."""
        try:
            self._delta.update_incremental()
        except (DeltaError, OSError) as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: BaseException) -> OSError:
        """A failed read or write of the log, as one line: :class:`StoreDamaged` naming the file when a
        file of the log is damaged."""
        try:
            damage = log_damage(self.root)
        except (OSError, ValueError, pa.ArrowException):
            damage = None  # the store cannot be read at all: the error says why
        if damage is not None:
            return StoreDamaged(f"{self.url}: the table's log is damaged: {damage}; restore that file from a copy "
                                "of the table (a Delta log cannot be rebuilt from the data files)")
        if isinstance(self.root, S3Location):
            return store_error(self.root, exc)
        text = one_line(exc)
        return OSError(os_errno(text), f"{self.url}: {text}") if os_errno(text) else OSError(f"{self.url}: {text}")

    def damaged_file(self, pages: bool = True) -> str | None:
        """The first of the table's files that is damaged, and how (None: its log reads, and each data
        file it names is there with its size, and its footer and, with ``pages``, its pages decode)."""
        files = self.files()
        for check_pages in (False, True) if pages else (False,):  # footers first: they are cheap
            for file in files:
                damage = file_damage(self.root, file.relative, file.size, check_pages, file.recorded)
                if damage is not None:
                    return f"{file.location}: {damage}; restore it from a copy of the table"
        return None

    def version(self) -> int:
        """The log's latest version: it changes with every commit."""
        self._refresh()
        return int(self._delta.version())

    def position(self, source: str, partition: int) -> int | None:
        """The partition's next offset as the latest commit says (None: nothing of it committed)."""
        return self.positions([(source, partition)])[source, partition]

    def positions(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """:meth:`position` of each (source, partition), from one read of the log."""
        self._refresh()
        return {(source, partition): self._delta.transaction_version(app_id(source, partition))
                for source, partition in partitions}

    def data_ends(self) -> dict[tuple[str, int], int] | None:
        """Per (source, partition), the offset after the last one its data files hold, from their names
        (every commit names a file of its flush's offsets); None when that cannot be told: files another
        application wrote (a foreign optimize) name no offsets. Below :meth:`position` when the table was
        restored to an older version (Delta's RESTORE keeps the newest application transaction) or files
        were taken out of its log."""
        ends: dict[tuple[str, int], int] = {}
        for file in self.files():
            name = FileName.parse(PurePosixPath(file.relative).name)
            if name is None:
                return None
            key = (name.source, name.partition)
            ends[key] = max(ends.get(key, 0), name.end + 1)
        return ends

    def data_end(self, source: str, partition: int) -> int | None:
        """:meth:`data_ends` of one partition (None also where no file holds it)."""
        ends = self.data_ends()
        return None if ends is None else ends.get((source, partition))

    def committed_letters(self, letters: Iterable[FileName], files: Iterable[TableFile]) -> set[FileName]:
        """Of dead-letter files (by their names), those of committed flushes, given the table's ``files``
        (:meth:`files`): a committed data file has the same name (every flush commits one); or another
        engine's OPTIMIZE rewrote that data file into one without a name: a committed file without a
        name may hold the partition (by its statistics), the offsets lie before the partition's next
        offset in the log, and no committed data file named for the partition holds any of them
        (another write of them, or a merge by ``table optimize``, would). Of a flush that lost its
        commit to such a one, the letters count too: they hold the same records."""
        named, foreign = by_name(files)
        partitions: dict[tuple[str, int], list[FileName]] = defaultdict(list)
        for name in named:
            partitions[name.source, name.partition].append(name)
        letters = list(letters)
        committed = {letter for letter in letters if letter in named}
        rewritten = [letter for letter in letters if letter not in committed
                     and any(file.may_hold_partition(letter.partition) for file in foreign)]
        positions = self.positions({(letter.source, letter.partition) for letter in rewritten}) if rewritten else {}
        return committed | {letter for letter in rewritten
                            if letter.end < (positions[letter.source, letter.partition] or 0)
                            and not any(name.start <= letter.end and letter.start <= name.end
                                        for name in partitions[letter.source, letter.partition])}

    def claim(self, source: str, identity: str) -> str:
        """The name under which the table keeps the offsets and files of the log ``identity`` (a local
        log's id, say) whose own name is ``source``: ``source`` itself unless the table holds another
        log under it, else ``source`` with a suffix of the identity's fingerprint. A name is claimed by
        a commit of its own, so two logs with the same folder name, on one host or many, keep their
        own offsets in one table."""
        mark = fingerprint(identity)
        for name in (source, f"{source}_{mark:014x}"[: len(source) + 9]):
            if self._claim(name, identity, mark):
                if name != source:
                    logger.warning("%s holds another log as source %r: %s is stored as source %r", self.url, source,
                                   identity, name)
                return name
        raise ValueError(f"{self.url}: the names {source!r} and {name!r} are both claimed by other logs")

    def _claim(self, name: str, identity: str, mark: int) -> bool:
        """Whether ``name`` stands for the log of fingerprint ``mark`` in the table, claimed now if no log was."""
        app = identity_app_id(name)
        for _ in range(REPLACE_ATTEMPTS):
            self._refresh()
            claimed = self._delta.transaction_version(app)
            if claimed is not None:
                return claimed == mark
            unclaimed_data = any(held == name for held, _ in self.data_ends() or {})
            try:  # as the next version or not at all: a claim another writer made meanwhile is read, not overwritten
                self._delta.create_write_transaction(
                    [], "append", TABLE_SCHEMA, partition_by=PARTITION_BY,
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(app, mark)], max_commit_retries=0,
                        custom_metadata={"specmetrics.source": name, "specmetrics.identity": identity}))
            except CommitFailedError:
                continue
            except (DeltaError, OSError) as exc:
                raise self._failed(exc) from None
            if unclaimed_data:
                logger.warning("%s holds files of source %r written before its sources were claimed: they are taken "
                               "as %s's", self.url, name, identity)
            return True
        raise OSError(f"{self.url}: other writers committed first {REPLACE_ATTEMPTS} times in a row while source "
                      f"{name!r} was claimed; try again")

    def commit(self, name: FileName, files: Sequence[DataFile]) -> None:
        """Commit the data files of the flush ``name`` (written under ``root``) as one commit that
        sets the partition's next offset past the flush; :class:`CommitRefused` if the table holds
        the partition past where the flush starts, or another writer committed it meanwhile."""
        app = app_id(name.source, name.partition)
        position = self.position(name.source, name.partition)
        if position not in (None, name.start) and self.data_end(name.source, name.partition) == name.start:
            position = name.start  # the offsets past the data files are read again (ingest.recovery)
        if position not in (None, name.start):
            raise CommitRefused(f"the table's next offset of partition {name.partition} of {name.source} is "
                                f"{position}, not {name.start} where the flush starts: another writer committed it",
                                position)
        now_ms = time.time_ns() // 1_000_000
        actions: list[AddAction | RemoveAction] = [_add(file, now_ms) for file in files]
        try:
            self._delta.create_write_transaction(
                actions, "append", TABLE_SCHEMA, partition_by=PARTITION_BY,
                commit_properties=CommitProperties(app_transactions=[Transaction(app, name.end + 1)]))
        except CommitFailedError as exc:
            raise CommitRefused(f"the commit of partition {name.partition} of {name.source} offsets {name.start}-"
                                f"{name.end} lost to another writer's ({exc})",
                                self.position(name.source, name.partition)) from None
        except (DeltaError, OSError) as exc:  # the store failed: whether the commit landed, the log says on start
            raise self._failed(exc) from None

    def files(self, since: datetime | None = None, until: datetime | None = None) -> list[TableFile]:
        """The data files the latest commit holds that may have rows in ``since <= event_time < until``:
        of the days from ``since`` to ``until``, and by their statistics where their commits recorded
        them (:meth:`TableFile.may_hold`)."""
        self._refresh()
        # Through the Arrow stream interface: pa.table() of a foreign table imports pandas (0.3 s).
        actions = pa.RecordBatchReader.from_stream(self._delta.get_add_actions(flatten=True)).read_all()

        def column(name: str) -> list[Any]:
            return actions[name].to_pylist() if name in actions.column_names else [None] * actions.num_rows

        first = None if since is None else f"{since:%Y-%m-%d}"
        last = None if until is None else f"{until:%Y-%m-%d}"
        files = []
        for path, size, dt, hour, rows, low, high, least, most, offset in zip(
                column("path"), column("size_bytes"), column("partition.dt"), column("partition.hour"),
                column("num_records"), column("min.event_time"), column("max.event_time"), column("min.log_partition"),
                column("max.log_partition"), column("max.log_offset"), strict=True):
            if (first is None or dt >= first) and (last is None or dt <= last):
                file = TableFile(address(self.root, path), path, size, dt, hour, rows, low, high,
                                 None if least is None or most is None else (least, most), offset)
                if file.may_hold(since, until):
                    files.append(file)
        return files

    def read(self, file: TableFile, columns: list[str] | None = None) -> pa.Table:
        """The rows of one of the table's data files."""
        path, filesystem = located(self.root, file.relative)
        return pq.read_table(path, columns=columns, filesystem=filesystem)

    def replace(self, removed: Sequence[TableFile], added: Sequence[DataFile]) -> None:
        """One commit that removes ``removed`` and adds ``added`` (data files under ``root``), the
        partitions' offsets unchanged: the same rows in other files."""
        now_ms = time.time_ns() // 1_000_000
        actions: list[AddAction | RemoveAction] = [
            RemoveAction(file.relative, False, now_ms, file.size, {"dt": file.dt, "hour": file.hour})
            for file in removed]
        actions.extend(_add(file, now_ms, data_change=False) for file in added)
        self._commit_while_held(actions, [file.relative for file in removed], "to merge")

    def add_missing_statistics(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Give the data files committed without statistics (by a specmetrics before them, or another
        writer) theirs, read from their footers: one commit that adds each again, rows unchanged, as
        Spark's ``ANALYZE TABLE ... COMPUTE DELTA STATISTICS`` does. How many files it gave them;
        ``progress(done, total)`` after each footer read."""
        bare = [file for file in self.files() if file.rows is None]
        stats = []
        with ThreadPoolExecutor(FOOTER_THREADS) as pool:  # on S3 each footer is a request: overlap them
            for done, file_stats in enumerate(pool.map(self._footer_statistics, bare), 1):
                stats.append(file_stats)
                if progress:
                    progress(done, len(bare))
        files = [DataFile(file.relative, file.size, file_stats) for file, file_stats in zip(bare, stats, strict=True)]
        if files:
            now_ms = time.time_ns() // 1_000_000
            self._commit_while_held([_add(file, now_ms, data_change=False) for file in files],
                                    [file.relative for file in files], "to add statistics to")
        return len(files)

    def _footer_statistics(self, file: TableFile) -> FileStats:
        try:
            return FileStats.read(*located(self.root, file.relative))
        except (OSError, pa.ArrowException):
            damage = file_damage(self.root, file.relative, file.size, pages=False)
            if damage is None:  # the file is whole: the store failed (the error says how)
                raise
            raise StoreDamaged(f"{file.location}: {damage}; restore it from a copy of the table") from None

    def _commit_while_held(self, actions: list[AddAction | RemoveAction], held: list[str], purpose: str) -> None:
        """Commit ``actions`` while the table still holds the files ``held`` (paths under the root);
        :class:`ReplaceRefused` when it does not, or other writers keep committing first."""
        # Built on the version whose files were checked, and committed as the next version or not at all:
        # delta-rs's own retry would commit on top of another writer's commit without checking that the
        # files are still there (two optimizes at once would each add their merged copy of them).
        once = CommitProperties(max_commit_retries=0)
        for _ in range(REPLACE_ATTEMPTS):
            present = {file.relative for file in self.files()}
            gone = [relative for relative in held if relative not in present]
            if gone:
                raise ReplaceRefused(f"{self.url}: {len(gone)} of the {len(held)} file(s) {purpose} are no longer in "
                                     f"the table (another 'table optimize' merged them, or a writer removed them; "
                                     f"{gone[0]}, ...): nothing was committed")
            try:
                self._delta.create_write_transaction(actions, "append", TABLE_SCHEMA, partition_by=PARTITION_BY,
                                                     commit_properties=once)
                return
            except CommitFailedError:
                continue  # another writer committed first: check again against its version
            except (DeltaError, OSError) as exc:
                raise self._failed(exc) from None
        raise ReplaceRefused(f"{self.url}: other writers committed first {REPLACE_ATTEMPTS} times in a row: nothing "
                             "was committed; try again")

    def vacuum(self, retention_hours: float, dry_run: bool) -> list[str]:
        """Remove (or with ``dry_run`` only list) the files no commit names that were last changed
        more than ``retention_hours`` ago: data files of writers killed or refused before their
        commit, dropped into the folders or merged by a compaction, and the dead-letter files
        (:meth:`committed_letters` keeps those of committed flushes) and rollups of such files.
        Younger ones may belong to a flush about to be committed, and stay. Their paths under the root."""
        self._refresh()
        cutoff = time.time() - retention_hours * 3600
        try:  # every file no commit names; delta-rs takes whole hours, so the age is checked here
            unnamed = list(self._delta.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False,
                                              full=True))
        except (DeltaError, OSError) as exc:
            raise self._failed(exc) from None
        changed = {file.relative: file.mtime_s for file in list_folder(self.root, "", recursive=True)}
        data = [relative for relative in unnamed if changed.get(relative, cutoff) < cutoff]
        held = self.files()
        old_letters = {name: relative for relative, mtime_s in changed.items()
                       if PurePosixPath(relative).parent.as_posix() == DEAD_LETTER_DIR and mtime_s < cutoff
                       and (name := FileName.parse(PurePosixPath(relative).name)) is not None and name.attempt}
        kept = self.committed_letters(old_letters, held)
        letters = [relative for name, relative in old_letters.items() if name not in kept]
        rolled = {f"{ROLLUP_DIR}/{file.relative}" for file in held}
        rollups = [relative for relative, mtime_s in changed.items()
                   if relative.startswith(f"{ROLLUP_DIR}/") and relative not in rolled and mtime_s < cutoff]
        files = sorted([*data, *letters, *rollups])
        if not dry_run:
            for relative in files:
                remove(self.root, relative)
                logger.info("removed %s: no commit names it", relative)
        return files

    def rows(self, file: TableFile) -> int:
        """The rows of one of the table's data files: as its commit recorded them, else from its footer."""
        if file.rows is not None:
            return file.rows
        path, filesystem = located(self.root, file.relative)
        return int(pq.read_metadata(path, filesystem=filesystem).num_rows)

    def checkpoint(self) -> int:
        """Write a checkpoint of the log at its latest version (readers then start from it, not from
        every commit), and remove log entries past the table's log retention (30 days by default);
        the version checkpointed."""
        self._refresh()
        self._delta.create_checkpoint()
        self._delta.cleanup_metadata()
        return self._delta.version()
