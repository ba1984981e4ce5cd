"""The output tree's file handling (real files)."""

from __future__ import annotations

from pathlib import Path

from ingest.durable import write_atomically
from ingest.output import WrittenFile, remove_written


def test_a_refused_flush_removes_its_files_but_not_what_a_new_owner_wrote_since(tmp_path: Path) -> None:
    ours, rewritten, gone = (tmp_path / name for name in ("a.parquet", "b.parquet", "c.parquet"))
    for path in (ours, rewritten, gone):
        write_atomically(path, b"evicted ingester")
    written = [WrittenFile.of(path) for path in (ours, rewritten, gone)]
    write_atomically(rewritten, b"new owner")  # the same name, renamed into place by the partition's new owner
    gone.unlink()  # removed by the new owner (remove_uncommitted)
    assert remove_written(written) == [ours]
    assert not ours.exists() and rewritten.read_bytes() == b"new owner"
