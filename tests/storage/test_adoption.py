"""The files another engine's OPTIMIZE wrote, named again by ``table optimize`` (storage.adoption):
the same rows and dead letters, under names that say their offsets, so that the table verifies
clean again and a restarted ingester reads where its data ends."""

from __future__ import annotations

import os
import re
import time
from datetime import timedelta
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from specmetrics.cli import main
from specmetrics.queries.verify import verify_table
from specmetrics.storage.layout import DEAD_LETTER_DIR, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import Table
from tests.support.events import T0
from tests.support.ingest import (
    append_bad_record,
    assert_rows_once,
    ingest_once,
    ingest_to_s3,
    optimizes_at_once,
    read_rows,
    rows_once,
)
from tests.support.loadgen import write_load
from tests.support.readers import numbers


def _spans(data: Path | S3Location) -> list[tuple[str, int, int] | None]:
    """Per committed data file (by hour and offsets), its flush's offsets; None for a file without a name."""
    return sorted(((file.hour, name.start, name.end) if (name := FileName.parse(PurePosixPath(file.relative).name))
                   else None for file in Table(data).files()), key=lambda span: span or ("", -1, -1))


def test_a_flush_across_hours_merged_in_one_hour_is_named_again_and_the_table_verifies_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    # 25 ms apart, 15 steps before an hour: flushes of 10 steps, of which offsets 10-19 in two hour folders
    write_load(log, rows=64 * 100, seed=35, step_ms=25.0, start_time=T0 - timedelta(milliseconds=375))
    append_bad_record(log)  # offset 100
    ingest_once(log, data, flush_rows=64 * 10)
    before = numbers(data)
    # the first hour's two files (offsets 0-9, and the rows of 10-14 of the flush across hours) into one
    assert DeltaTable(str(data)).optimize.compact(partition_filters=[("hour", "=", "11")])["numFilesRemoved"] == 2
    assert _spans(data)[0] is None and Table(data).data_ends() is None
    assert [partition.first for partition in verify_table(data).partitions] == [10]  # offsets 0-9: in no name
    write_load(log, rows=64 * 10, seed=36, engine_prefix="later")
    ingest_once(log, data, flush_rows=64 * 10)  # offsets 101-110, named by the ingester

    assert main(["table", "optimize", "--data", str(data), "--target-rows", str(64 * 5)]) == 0  # nothing to merge
    said = capsys.readouterr().out
    assert "; 1 file(s) another application wrote (no offsets in their names) written again into 3 named" in said
    assert "left as they are" not in said
    spans = _spans(data)
    assert spans[:4] == [("11", 0, 9), ("11", 10, 19), ("12", 10, 19), ("12", 20, 29)] and spans[-1] == ("12", 101, 110)
    across = {file.relative.split("/", 2)[2] for file in Table(data).files() if file.relative.endswith(".parquet")
              and "-00000000000000000010-" in file.relative}
    assert len(across) == 1  # the flush across hours, written again whole under one new name
    assert Table(data).data_ends() == {("log", 0): 111} == {("log", 0): Table(data).position("log", 0)}
    assert_rows_once(data, 64 * 110)
    rows = read_rows(data)
    assert rows.filter(pc.less(rows["log_offset"], 100)).num_rows == 64 * 100
    assert main(["verify", "--data", str(data)]) == 3  # clean but for the dead letter
    out = capsys.readouterr().out
    assert "log             0             0          110       12     0         0" in out
    assert "files another application wrote" not in out
    assert "set aside: log partition 0: 1 record(s), offsets 100-100" in out
    # the numbers of the first 100 offsets as before: the later rows are another engine's
    later = numbers(data)
    assert later != before and len(later[0]) == len(before[0]) + 1


def test_a_table_another_engine_optimized_whole_gets_its_dead_letters_named_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The flush of a dead letter alone had a data file without rows, which the OPTIMIZE dropped."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=37)
    append_bad_record(log)  # offset 30
    ingest_once(log, data, flush_rows=64 * 2)
    assert DeltaTable(str(data)).optimize.compact()["numFilesRemoved"] == 16
    assert _spans(data) == [None]
    assert main(["table", "optimize", "--data", str(data)]) == 0
    assert _spans(data) == [("12", 0, 30)]
    [letters] = [path for path in (data / DEAD_LETTER_DIR).iterdir() if "-00000000000000000000-" in path.name]
    hours_ago = time.time() - 3 * 3600
    for path in data.rglob("*"):
        os.utime(path, (hours_ago, hours_ago))
    assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "1"]) == 0
    assert list((data / DEAD_LETTER_DIR).iterdir()) == [letters]  # the flush's own removed: its name is gone
    capsys.readouterr()
    assert main(["verify", "--data", str(data)]) == 3
    out = capsys.readouterr().out
    assert "log             0             0           30        1     0         0" in out
    assert "set aside: log partition 0: 1 record(s), offsets 30-30" in out
    assert_rows_once(data, 64 * 30)


def test_files_that_cannot_be_named_are_left_with_the_partitions_they_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A copy of stored rows (a foreign file whose rows a named file of the same hour holds) and rows
    written before schema 1.9 (no log_source) say nothing sure of their offsets: they stay, verify
    keeps counting the copy twice, and no other file of their partitions is named again."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 20, seed=38)
    ingest_once(log, data, flush_rows=64 * 10)
    [first, _] = sorted(Table(data).files(), key=lambda file: file.relative)
    copy = Table(data).read(first).append_column("dt", pa.array([first.dt] * (first.rows or 0)))
    copy = copy.append_column("hour", pa.array([first.hour] * (first.rows or 0)))
    write_deltalake(str(data), copy.cast(pa.schema([field.with_type(pa.string()) if pa.types.is_dictionary(
        field.type) else field for field in copy.schema])), mode="append", partition_by=["dt", "hour"])
    assert main(["table", "optimize", "--data", str(data)]) == 0
    said = capsys.readouterr().out
    assert "; 1 file(s) another application wrote (no offsets in their names) left as they are" in said
    assert "written again" not in said
    assert _spans(data).count(None) == 1
    report = verify_table(data)
    assert report.rows_twice == 64 * 10 and len(report.foreign) == 1

    older = copy.set_column(copy.schema.get_field_index("log_source"), "log_source",
                            pa.nulls(copy.num_rows, pa.string()))
    write_deltalake(str(data), older.cast(pa.schema([field.with_type(pa.string()) if pa.types.is_dictionary(
        field.type) else field for field in older.schema])), mode="append", partition_by=["dt", "hour"])
    assert main(["table", "optimize", "--data", str(data)]) == 0
    assert "; 2 file(s) another application wrote (no offsets in their names) left as they are" in \
        capsys.readouterr().out


def test_a_table_on_s3_another_engine_optimized_is_named_again(
        s3_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, location = tmp_path / "log", S3Location.parse(s3_url)
    write_load(log, rows=64 * 20, seed=39)
    append_bad_record(log)  # offset 20
    ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=64 * 5)
    assert DeltaTable(s3_url, storage_options=location.storage_options()).optimize.compact()["numFilesRemoved"] == 5
    assert main(["table", "optimize", "--data", s3_url]) == 0
    assert "; 1 file(s) another application wrote (no offsets in their names) written again into 1 named" in \
        capsys.readouterr().out
    assert _spans(location) == [("12", 0, 20)]
    assert main(["verify", "--data", s3_url]) == 3
    out = capsys.readouterr().out
    assert "log             0             0           20        1     0         0" in out
    assert "set aside: log partition 0: 1 record(s), offsets 20-20" in out
    assert rows_once(s3_url) == 64 * 20


def test_two_optimizes_at_once_name_a_foreign_file_again_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one that commits second finds the foreign file gone, commits nothing and removes what it wrote."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 20, seed=40)
    append_bad_record(log)
    ingest_once(log, data, flush_rows=64 * 5)
    DeltaTable(str(data)).optimize.compact()
    first, refused = optimizes_at_once(data, 64 * 100, monkeypatch)
    assert first.named_again == 1  # the other optimize commits first
    assert re.search(r"1 of the 1 file\(s\) to merge are no longer in the table", str(refused))
    assert _spans(data) == [("12", 0, 20)]
    assert len(list(data.glob("dt=*/hour=*/log-*.parquet"))) == 4 + 1 + 1  # the five flushes', the one committed
    assert len(list((data / DEAD_LETTER_DIR).iterdir())) == 2  # the flush's, and the one committed
    assert_rows_once(data, 64 * 20)
