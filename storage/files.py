"""Files under an output's root, on local disk or on S3, through one interface: written whole
(a local file durably through a temp file and a rename, an object in one upload), read, listed and
removed by their path under the root (``dt=…/hour=…/<name>``, ``_dead_letter/<name>``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from stat import S_ISREG

import pyarrow as pa
from pyarrow.fs import FileSelector, FileType

from specmetrics.storage.durable import write_durably
from specmetrics.storage.location import S3Location, located


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A file as this process wrote it, under its output's root: another writer that renames its
    own file onto the same local path gives that path another inode and modification time."""

    root: Path | S3Location
    relative: str
    size: int
    inode: int = 0
    mtime_ns: int = 0

    @property
    def path(self) -> Path:
        """The file of a local output."""
        assert isinstance(self.root, Path)
        return self.root / self.relative

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.relative).suffix

    @classmethod
    def of(cls, root: Path, path: Path) -> WrittenFile:
        stat = path.stat()
        return cls(root, path.relative_to(root).as_posix(), stat.st_size, stat.st_ino, stat.st_mtime_ns)


def write_file(root: Path | S3Location, relative: str, write: Callable[[Path | pa.NativeFile], None]) -> WrittenFile:
    """Write ``relative`` under ``root``: a local file durably (``write`` gets a temp path), an
    object in one upload (``write`` gets the stream)."""
    if isinstance(root, Path):
        path = root / relative
        write_durably(path, write)
        return WrittenFile.of(root, path)
    filesystem = root.filesystem()
    with filesystem.open_output_stream(root.key(relative)) as stream:
        write(stream)
        size = stream.tell()
    return WrittenFile(root, relative, size)


def write_bytes(data: bytes, where: Path | pa.NativeFile) -> None:
    """``write_file``'s writer of ``data`` as it is."""
    if isinstance(where, Path):
        where.write_bytes(data)
    else:
        where.write(data)


def read_bytes(root: Path | S3Location, relative: str) -> bytes | None:
    """The contents of ``relative`` under ``root`` (None: there is no such file)."""
    path, filesystem = located(root, relative)
    try:
        with filesystem.open_input_stream(path) as stream:
            data: bytes = stream.read()
    except FileNotFoundError:
        return None
    return data


@dataclass(frozen=True, slots=True)
class ListedFile:
    """A file found under an output's root: its path under the root, size, and when it last changed."""

    relative: str
    size: int
    mtime_s: float


def list_folder(root: Path | S3Location, folder: str, recursive: bool = False) -> list[ListedFile]:
    """The files in ``folder`` (a path under ``root``; with ``recursive``, in its subfolders too), by
    path; none if it does not exist."""
    if isinstance(root, Path):
        paths = (root / folder).rglob("*") if recursive else (root / folder).glob("*")
        return sorted(filter(None, (_listed(root, path) for path in paths)), key=lambda file: file.relative)
    prefix = root.key("")
    infos = root.filesystem().get_file_info(FileSelector(root.key(folder), allow_not_found=True, recursive=recursive))
    return sorted((ListedFile(info.path.removeprefix(prefix).lstrip("/"), info.size, info.mtime.timestamp())
                   for info in infos if info.type == FileType.File), key=lambda file: file.relative)


def _listed(root: Path, path: Path) -> ListedFile | None:
    """``path`` as listed; None for a folder, or a file renamed or removed since the listing (a writer's temp file)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return ListedFile(path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime) if S_ISREG(stat.st_mode) else None


def remove(root: Path | S3Location, relative: str) -> None:
    """Delete ``relative`` under ``root`` (nothing if it is gone already)."""
    path, filesystem = located(root, relative)
    with suppress(FileNotFoundError):  # removed by another process meanwhile, or never there
        filesystem.delete_file(path)


def remove_written(files: list[WrittenFile]) -> list[str]:
    """Delete the files of a flush whose commit was refused, unless they were replaced since:
    the partition's new owner may already have rewritten the same local name, and that one stays
    (an object's name has the flush's own attempt token: none but its writer writes it)."""
    removed = []
    for file in files:
        if isinstance(file.root, S3Location):
            file.root.filesystem().delete_file(file.root.key(file.relative))
            removed.append(file.relative)
            continue
        try:
            stat = file.path.stat()
        except FileNotFoundError:  # removed since (an incomplete flush, see ingest.recovery)
            continue
        if (stat.st_ino, stat.st_mtime_ns) == (file.inode, file.mtime_ns):
            file.path.unlink(missing_ok=True)
            removed.append(file.relative)
    return removed
