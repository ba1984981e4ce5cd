"""Files under an output's root, the same calls on local disk and on S3 (the suite's SeaweedFS)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from specmetrics.storage.durable import write_atomically
from specmetrics.storage.files import (
    WrittenFile,
    list_folder,
    read_bytes,
    remove,
    remove_written,
    write_bytes,
    write_file,
)
from specmetrics.storage.location import S3Location


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Path | S3Location:
    if request.param == "local":
        return tmp_path / "out"
    return S3Location.parse(request.getfixturevalue("s3_url"))


def test_a_file_is_written_read_listed_and_removed_by_its_path_under_the_root(root: Path | S3Location) -> None:
    started = time.time()
    written = write_file(root, "_dead_letter/a.jsonl", lambda where: write_bytes(b"one\n", where))
    write_file(root, "_dead_letter/b.jsonl", lambda where: write_bytes(b"two\n", where))
    write_file(root, "_dead_letter/deeper/c.jsonl", lambda where: write_bytes(b"three\n", where))
    assert (written.relative, written.size) == ("_dead_letter/a.jsonl", 4)
    assert read_bytes(root, "_dead_letter/b.jsonl") == b"two\n"
    assert read_bytes(root, "_dead_letter/none.jsonl") is None
    listed = list_folder(root, "_dead_letter")
    assert [file.relative for file in listed] == ["_dead_letter/a.jsonl", "_dead_letter/b.jsonl"]
    assert all(started - 5 <= file.mtime_s <= time.time() + 5 for file in listed)
    remove(root, "_dead_letter/a.jsonl")
    remove(root, "_dead_letter/a.jsonl")  # gone already: nothing to do
    assert [file.relative for file in list_folder(root, "_dead_letter")] == ["_dead_letter/b.jsonl"]
    assert list_folder(root, "_rollup") == []


def test_a_refused_flush_removes_its_files_but_not_what_a_new_owner_wrote_since(tmp_path: Path) -> None:
    ours, rewritten, gone = (tmp_path / name for name in ("a.parquet", "b.parquet", "c.parquet"))
    for path in (ours, rewritten, gone):
        write_atomically(path, b"evicted ingester")
    written = [WrittenFile.of(tmp_path, path) for path in (ours, rewritten, gone)]
    write_atomically(rewritten, b"new owner")  # the same name, renamed into place by the partition's new owner
    gone.unlink()  # removed since: its flush was incomplete when the new owner took the partition
    assert remove_written(written) == ["a.parquet"]
    assert not ours.exists() and rewritten.read_bytes() == b"new owner"
    assert os.listdir(tmp_path) == ["b.parquet"]


def test_racing_atomic_writes_leave_one_whole_record_and_no_temp_file(tmp_path: Path) -> None:
    """The publisher's periodic health report and the one at close write the same file at once."""
    path = tmp_path / "health.json"
    records = [json.dumps({"writer": n, "pad": "x" * (n * 997 % 5000)}).encode() for n in range(8)]
    start = threading.Barrier(len(records))
    errors: list[BaseException] = []

    def write(record: bytes) -> None:
        start.wait()
        try:
            for _ in range(200):
                write_atomically(path, record)
        except OSError as exc:  # another writer renamed or removed the temp file this one was writing
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(record,)) for record in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert path.read_bytes() in records
    assert [p.name for p in tmp_path.iterdir()] == ["health.json"]
