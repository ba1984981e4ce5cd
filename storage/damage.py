"""What is damaged in a store: the table's log (a commit missing, truncated or garbage, a checkpoint
missing or unreadable) or a data file (missing, another size than its commit says, a footer or a
page that does not decode, a page whose checksum does not match, other rows or event times than
its commit recorded). Readers fail with the text of the library that tripped (delta-rs, DuckDB),
naming no file; these checks name it, in one line."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileType

from specmetrics.storage.files import list_folder, read_bytes
from specmetrics.storage.location import S3Location, located
from specmetrics.storage.parquet import MS, FileStats

LOG_DIR = "_delta_log"
#: What a commit recorded of a data file: its rows and its first and last event time (each None where
#: it did not).
Recorded = tuple[int | None, datetime | None, datetime | None] | None
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


class StoreDamaged(OSError):
    """A file of the store cannot be read as what it must be: the message names it and the problem."""

    #: The exit code of every command that stops on a damaged file ("not clean" is 1, other errors 2).
    exit_code = 4


def one_line(exc: BaseException) -> str:
    """An exception's text as one line: its first line and the causes delta-rs chains below it
    (``↳ ...``), without colours and without the Rust stack frames it may append."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines()
    if not lines:
        return type(exc).__name__
    causes = [line.strip().removeprefix("↳").strip() for line in lines[1:] if line.strip().startswith("↳")]
    line = ": ".join([lines[0].strip(), *causes])
    return re.sub(r"[\x00-\x1f\x7f]", lambda char: f"\\x{ord(char[0]):02x}", line)


def os_errno(text: str) -> int | None:
    """The errno a message of Rust's standard library names (``... (os error 28)``), if any."""
    found = re.search(r"\(os error (\d+)\)", text)
    return int(found[1]) if found else None


def log_damage(root: Path | S3Location) -> str | None:
    """The first damaged file of the table's log at ``root`` and what is wrong with it (None: every
    commit from the last checkpoint on is there and reads as Delta actions, and the checkpoint reads)."""
    names = {file.relative.rsplit("/", 1)[-1] for file in list_folder(root, LOG_DIR)}
    commits = sorted(int(match[1]) for name in names if (match := _COMMIT.match(name)))
    checkpoints = sorted(int(match[1]) for name in names if (match := _CHECKPOINT.match(name)))
    start = 0
    pointer = read_bytes(root, f"{LOG_DIR}/_last_checkpoint")
    if pointer is not None:
        try:
            start = int(json.loads(pointer)["version"])
        except (ValueError, KeyError, TypeError) as exc:
            return f"{LOG_DIR}/_last_checkpoint: not a checkpoint's version ({one_line(exc)})"
    elif checkpoints:
        start = checkpoints[-1]
    if start:
        parts = sorted(name for name in names if name.startswith(f"{start:020d}.checkpoint"))
        if not parts:
            return f"{LOG_DIR}/{start:020d}.checkpoint.parquet: the table's last checkpoint, but missing"
        for name in parts:
            try:
                pq.read_table(pa.BufferReader(read_bytes(root, f"{LOG_DIR}/{name}") or b""))
            except (pa.ArrowException, OSError) as exc:
                return f"{LOG_DIR}/{name}: not a readable checkpoint ({one_line(exc)})"
    if not commits:
        return None
    for version in range(start, commits[-1] + 1):
        name = f"{version:020d}.json"
        if version not in commits:
            if start and version == start:
                continue  # a checkpoint stands for its own version's commit, which a clean-up may have removed
            return f"{LOG_DIR}/{name}: missing (commits up to {commits[-1]} are there); the table's history " \
                   "has a hole"
        problem = _commit_problem(read_bytes(root, f"{LOG_DIR}/{name}") or b"")
        if problem is not None:
            return f"{LOG_DIR}/{name}: {problem}"
    return None


def _commit_problem(content: bytes) -> str | None:
    """What makes a commit's content other than Delta actions, one JSON object per line."""
    lines = content.splitlines()
    if not lines:
        return "empty"
    for number, line in enumerate(lines, 1):
        try:
            action = json.loads(line)
        except ValueError:
            return f"line {number} is not JSON (a truncated or overwritten commit)"
        if not isinstance(action, dict) or len(action) != 1:
            return f"line {number} is not a Delta action"
    return None


def file_damage(root: Path | S3Location, relative: str, size: int, pages: bool = True,
                recorded: Recorded = None) -> str | None:
    """What is wrong with the data file ``relative`` whose commit says ``size`` bytes (and what
    ``recorded`` says; None: it is there with that size, and :func:`parquet_damage` finds nothing)."""
    path, filesystem = located(root, relative)
    info = filesystem.get_file_info(path)
    found = info.size if info.type == FileType.File else None
    return size_damage(found, size) or parquet_damage(root, relative, pages, recorded)


def size_damage(found: int | None, size: int) -> str | None:
    """What is wrong with a data file of ``found`` bytes (None: missing) whose commit says ``size``
    (None: nothing)."""
    if found is None:
        return "named by the table's log, but missing"
    return None if found == size else f"named by the table's log with {size} bytes, but has {found}"


def parquet_damage(root: Path | S3Location, relative: str, pages: bool = True, recorded: Recorded = None
                   ) -> str | None:
    """What does not decode in the Parquet file ``relative``: its footer or, with ``pages``, a page (a
    page written with a checksum must match it); or where its footer contradicts what its commit
    ``recorded``; None: nothing."""
    try:
        path, filesystem = located(root, relative)
        parquet = pq.ParquetFile(filesystem.open_input_file(path), page_checksum_verification=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        return f"its footer does not decode ({one_line(exc)})"
    if recorded is not None and (wrong := recorded_damage(FileStats.footer(parquet.metadata), *recorded)):
        return wrong
    for group in range(parquet.num_row_groups if pages else 0):
        try:
            parquet.read_row_group(group)
        except (pa.ArrowException, OSError, ValueError) as exc:
            return f"a page of row group {group} does not decode ({one_line(exc)})"
    return None


def recorded_damage(footer: FileStats, rows: int | None, first: datetime | None, last: datetime | None) -> str | None:
    """Where a file's footer contradicts what its commit recorded: its rows, or event times outside
    the first and last its commit gave (to the millisecond), by which readers of a window would
    skip rows of it."""
    if rows is not None and footer.rows != rows:
        return f"named by the table's log with {rows:,} rows, but holds {footer.rows:,}"
    if first is None or last is None or not footer.low:
        return None
    low, high = footer.low[0], footer.high[0]
    if low < first or high - last >= MS:  # type: ignore[operator]
        return (f"its rows' event times ({low} to {high}) lie outside those its commit recorded ({first} to "
                f"{last}): readers of a time window would skip rows of it")
    return None
