"""Small files of a table merged (storage.compaction, ``specmetrics table optimize``): the same rows,
numbers, report and dead letters from fewer files, and ingesting goes on."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from specmetrics.cli import main
from storage.compaction import compact
from storage.layout import DATA_GLOB, FileName
from storage.table import Table
from tests.support.events import T0
from tests.support.ingest import append_bad_record, assert_rows_once, ingest_once
from tests.support.loadgen import write_load
from tests.support.readers import numbers, report


def test_optimize_merges_small_files_and_every_reader_says_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    # 25 ms apart, 15 steps before an hour: flushes of 10 steps, of which offsets 10-19 in two hour folders
    write_load(log, rows=64 * 100, seed=28, step_ms=25.0, start_time=T0 - timedelta(milliseconds=375))
    append_bad_record(log)
    ingest_once(log, data, flush_rows=64 * 10, table=True)
    before, before_report = numbers(data), report(data, tmp_path / "before")
    files_before = len(Table(data).files())
    assert main(["verify", "--data", str(data)]) == 3
    capsys.readouterr()

    assert main(["table", "optimize", "--data", str(data), "--target-rows", str(64 * 40)]) == 0
    assert "merged " in capsys.readouterr().out
    files = Table(data).files()
    names = [(file.hour, FileName.parse(file.path.name)) for file in files]
    assert sorted((hour, name.start, name.end) for hour, name in names if name) == [
        ("11", 0, 9), ("11", 10, 19), ("12", 10, 19), ("12", 20, 59), ("12", 60, 100)]  # 100: the dead letter
    assert len(files) < files_before
    assert max(pq.read_metadata(file.path).num_rows for file in files) <= 64 * 40
    assert numbers(data) == before
    assert report(data, tmp_path / "after") == before_report
    assert main(["verify", "--data", str(data)]) == 3  # clean but for the dead letter, still counted once
    out = capsys.readouterr().out
    assert "set aside: log partition 0: 1 record(s), offsets 100-100" in out
    assert "gap" not in out.split("\n", 3)[3] and "overlap:" not in out
    assert main(["table", "optimize", "--data", str(data), "--target-rows", str(64 * 40)]) == 0
    assert "merged 0 file(s)" in capsys.readouterr().out  # nothing more to merge

    write_load(log, rows=64 * 10, seed=29, engine_prefix="more")
    assert ingest_once(log, data, flush_rows=64 * 10).rows == 64 * 10
    assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "0"]) == 0
    assert "removed " in capsys.readouterr().out
    assert set(data.glob(DATA_GLOB)) == {file.path for file in Table(data).files()}
    assert_rows_once(data, 64 * 110)
    assert main(["verify", "--data", str(data)]) == 3


def test_a_run_is_cut_at_the_target_and_at_a_gap(tmp_path: Path) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=30)
    ingest_once(log, data, flush_rows=64 * 2, table=True)  # 15 flushes of 128 rows, one hour folder
    assert len(Table(data).files()) == 15
    done = compact(Table(data), target_rows=64 * 7)  # 3 flushes a file: 5 files
    assert (done.merged_files, done.new_files, done.rows) == (15, 5, 64 * 30)
    spans = sorted((name.start, name.end) for file in Table(data).files() if (name := FileName.parse(file.path.name)))
    assert spans == [(0, 5), (6, 11), (12, 17), (18, 23), (24, 29)]
    assert_rows_once(data, 64 * 30)
