"""Small files of a table merged (storage.compaction, ``specmetrics table optimize``): the same rows,
numbers, report and dead letters from fewer files, and ingesting goes on."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import timedelta
from pathlib import Path, PurePosixPath

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyarrow.fs import FileSelector

from specmetrics import scheduled
from specmetrics.cli import main
from specmetrics.queries.rollup import RollupCheck, check_rollups
from specmetrics.storage.compaction import compact
from specmetrics.storage.files import list_folder
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, ROLLUP_DIR, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.parquet import FileStats
from specmetrics.storage.table import LOG_DIR, DataFile, ReplaceRefused, Table, TableFile
from tests.support.events import T0
from tests.support.ingest import (
    append_bad_record,
    assert_rows_once,
    ingest_once,
    ingest_to_s3,
    main_query,
    optimizes_at_once,
    rows_once,
)
from tests.support.loadgen import write_load
from tests.support.readers import numbers, report


def test_optimize_merges_small_files_and_every_reader_says_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    # 25 ms apart, 15 steps before an hour: flushes of 10 steps, of which offsets 10-19 in two hour folders
    write_load(log, rows=64 * 100, seed=28, step_ms=25.0, start_time=T0 - timedelta(milliseconds=375))
    append_bad_record(log)
    ingest_once(log, data, flush_rows=64 * 10)
    before, before_report = numbers(data), report(data, tmp_path / "before")
    files_before = len(Table(data).files())
    assert main(["verify", "--data", str(data)]) == 3
    capsys.readouterr()

    assert main(["table", "optimize", "--data", str(data), "--target-rows", str(64 * 40)]) == 0
    said = capsys.readouterr()
    assert ", rolled up 2 file(s) of their days" in said.out  # the merged ones
    merged = int(re.search(r"merged (\d+) file\(s\) into 2 ", said.out)[1])  # type: ignore[index]
    assert f"merge: {merged}/{merged} files" in said.err  # the progress, last said at the end
    assert check_rollups(data) == RollupCheck([], [])  # every file's rollup there, and equal to its rows
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
    assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "0", "--force"]) == 0
    assert "removed " in capsys.readouterr().out
    assert set(data.glob(DATA_GLOB)) == {file.path for file in Table(data).files()}
    assert {path.relative_to(data / ROLLUP_DIR).as_posix() for path in data.glob(f"{ROLLUP_DIR}/{DATA_GLOB}")} == {
        file.relative for file in files}  # the rollups of the files merged are gone, the merged files' stay
    assert_rows_once(data, 64 * 110)
    assert main(["verify", "--data", str(data)]) == 3


def test_a_run_is_cut_at_the_target_and_at_a_gap(tmp_path: Path) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=30)
    ingest_once(log, data, flush_rows=64 * 2)  # 15 flushes of 128 rows, one hour folder
    assert len(Table(data).files()) == 15
    said: list[tuple[int, int]] = []
    done = compact(Table(data), target_rows=64 * 7, progress=lambda *done: said.append(done))  # 3 flushes a file
    assert said == [(3, 15), (6, 15), (9, 15), (12, 15), (15, 15)]  # the files merged, after each run
    assert (done.merged_files, done.new_files, done.rows) == (15, 5, 64 * 30)
    spans = sorted((name.start, name.end) for file in Table(data).files() if (name := FileName.parse(file.path.name)))
    assert spans == [(0, 5), (6, 11), (12, 17), (18, 23), (24, 29)]
    assert_rows_once(data, 64 * 30)


def test_optimize_vacuum_and_checkpoint_keep_a_table_on_s3(
        s3_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    log, state, location = tmp_path / "log", tmp_path / "state", S3Location.parse(s3_url)
    write_load(log, rows=64 * 60, seed=31)
    append_bad_record(log)
    with monkeypatch.context() as old:  # as an older specmetrics committed them: no statistics
        old.setattr(FileStats, "json", lambda self: "{}")
        ingest_to_s3(log, s3_url, state, flush_rows=64 * 10)  # 6 flushes of 10 steps, and one of the dead letter
    before = numbers(s3_url)  # type: ignore[arg-type]
    first = Table(location).files()[0]
    stray = first.relative.replace(".parquet", "0.parquet")  # no commit names it
    location.filesystem().copy_file(location.key(first.relative), location.key(stray))
    assert main(["rollup", "--data", s3_url]) == 0

    assert main(["table", "optimize", "--data", s3_url, "--target-rows", str(64 * 40)]) == 0
    out = capsys.readouterr().out
    assert "merged 7 file(s) into 2 (3,840 rows), rolled up 2 file(s)" in out
    assert "; 7 file(s) committed without statistics have them now" in out  # their footers read from S3
    assert [file.rows for file in Table(location).files()] == [64 * 40, 64 * 20]
    assert check_rollups(location) == RollupCheck([], [])
    spans = sorted((name.start, name.end) for file in Table(location).files()
                   if (name := FileName.parse(PurePosixPath(file.relative).name)))
    assert spans == [(0, 39), (40, 60)]  # 60: the dead letter's flush
    assert numbers(s3_url) == before  # type: ignore[arg-type]
    assert main(["verify", "--data", s3_url]) == 3  # clean but for the dead letter, in the merged flush's file
    assert "set aside: log partition 0: 1 record(s), offsets 60-60" in capsys.readouterr().out

    assert main(["table", "vacuum", "--data", s3_url, "--retention-hours", "0", "--force", "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert f"would remove {stray}\n" in listed and "would remove 16 file(s)" in listed  # 7 merged, their letters
    assert f"would remove {ROLLUP_DIR}/{first.relative}\n" in listed  # and rollups
    assert main(["table", "vacuum", "--data", s3_url, "--retention-hours", "0", "--force"]) == 0
    assert "removed 16 file(s)" in capsys.readouterr().out
    stored = {info.path.removeprefix(location.key("") + "/") for info in location.filesystem().get_file_info(
        FileSelector(location.key(""), recursive=True))
        if info.path.endswith(".parquet") and "/dt=" in info.path and ROLLUP_DIR not in info.path}
    assert stored == {file.relative for file in Table(location).files()}
    [merged] = [file.relative for file in Table(location).files() if "-00000000000000000060." in file.relative]
    letters = PurePosixPath(DEAD_LETTER_DIR, PurePosixPath(merged).name).with_suffix(".jsonl").as_posix()
    assert [file.relative for file in list_folder(location, DEAD_LETTER_DIR)] == [letters]
    assert [file.relative for file in list_folder(location, ROLLUP_DIR, recursive=True)] == sorted(
        f"{ROLLUP_DIR}/{relative}" for relative in stored)

    assert main(["table", "checkpoint", "--data", s3_url]) == 0
    assert f"checkpointed {s3_url} at version" in capsys.readouterr().out
    assert any(file.relative.endswith(".checkpoint.parquet") for file in list_folder(location, LOG_DIR))
    assert rows_once(s3_url) == 64 * 60
    assert main(["verify", "--data", s3_url]) == 3


def test_two_optimizes_at_once_merge_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both read the same files and write their merged copies; the one that commits second finds the
    files gone and commits nothing, and removes its copies (before: both committed, every merged row
    counted twice, and verify said clean)."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=31)
    ingest_once(log, data, flush_rows=64 * 2)
    flushes = {file.relative for file in Table(data).files()}
    first, refused = optimizes_at_once(data, 64 * 7, monkeypatch)
    assert first.merged_files == 15  # the other optimize commits first
    assert re.search(r"15 of the 15 file\(s\) to merge are no longer in the table \(another 'table optimize' merged "
                     r"them.*nothing was committed", str(refused))
    assert rows_once(str(data)) == 64 * 30  # the rows readers count
    assert_rows_once(data, 64 * 30)
    merged = {file.relative for file in Table(data).files()}
    assert len(flushes) == 15 and len(merged) == 5
    assert {path.relative_to(data).as_posix() for path in data.glob(DATA_GLOB)} == flushes | merged


def test_vacuum_keeps_what_is_younger_than_the_retention_given_and_refuses_a_risky_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Half an hour is half an hour (it was read as 0 hours, and removed the files of flushes being
    committed); under an hour only with --force; nonsense is one line."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 4, seed=32)
    ingest_once(log, data, flush_rows=64 * 2)
    folder = Table(data).files()[0].path.parent
    young, old = folder / "unnamed-young.parquet", folder / "unnamed-old.parquet"
    for path, age_s in ((young, 10 * 60), (old, 40 * 60)):
        path.write_bytes(b"PAR1")
        os.utime(path, (time.time() - age_s, time.time() - age_s))
    capsys.readouterr()
    assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "0.5"]) == 2
    assert ("--retention-hours 0.5 is under 1: it can remove the files of a flush an ingester has written and not "
            "committed yet") in capsys.readouterr().err
    assert young.exists() and old.exists()
    assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "0.5", "--force"]) == 0
    assert young.exists() and not old.exists()
    assert f"removed {old.relative_to(data).as_posix()}" in capsys.readouterr().out
    for nonsense in ("inf", "nan", "-1", "soon"):
        with pytest.raises(SystemExit) as exit_:
            main(["table", "vacuum", "--data", str(data), "--retention-hours", nonsense])
        assert exit_.value.code == 2
        assert f"'{nonsense}' is not a number of hours" in capsys.readouterr().err
    assert_rows_once(data, 64 * 4)


def test_delta_rs_own_compaction_twice_at_once_counts_every_row_twice(tmp_path: Path) -> None:
    """Why ``table optimize`` is not delta-rs's ``optimize.compact()``: two of them planned on the same
    version both commit (delta-rs's conflict checker lets a second removal of a file through when it
    changes no data), so every merged row lies in two files. The day this fails, delta-rs refuses the
    second compaction, and that reason to keep storage/compaction.py is gone."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=31)
    ingest_once(log, data, flush_rows=64 * 2)
    first, second = DeltaTable(str(data)), DeltaTable(str(data))
    assert first.optimize.compact()["numFilesRemoved"] == 15
    assert second.optimize.compact()["numFilesRemoved"] == 15  # the same files, from the version before
    assert len(Table(data).files()) == 2
    assert Table(data).files()[0].rows == Table(data).files()[1].rows == 64 * 30
    assert main_query(str(data), "SELECT count(*), count(DISTINCT (event_id, request_id)) FROM request_steps") == [
        (2 * 64 * 30, 64 * 30)]  # every row twice, for every reader


def test_a_file_another_engines_optimize_wrote_is_named_again_and_the_rest_merged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Another engine's OPTIMIZE (delta-rs's here; Spark's, Databricks' alike) names its files without
    offsets. Before: every later table optimize, and so table maintain (the stack's service), failed on
    that file, and small files piled up unmerged, unchecked and unvacuumed (storage.adoption names it
    again: tests/storage/test_adoption.py)."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=32)
    ingest_once(log, data, flush_rows=64 * 2)
    assert DeltaTable(str(data)).optimize.compact()["numFilesRemoved"] == 15
    write_load(log, rows=64 * 30, seed=33, engine_prefix="later")
    ingest_once(log, data, flush_rows=64 * 2)  # 15 more small files, named by the ingester
    [foreign] = [file.relative for file in Table(data).files() if FileName.parse(PurePosixPath(file.relative).name)
                 is None]
    assert main(["table", "maintain", "--data", str(data), "--target-rows", str(64 * 30)]) == 0
    said = capsys.readouterr().out
    assert "merged 15 file(s) into 1 " in said
    assert "; 1 file(s) another application wrote (no offsets in their names) written again into 1 named" in said
    assert "checkpointed" in said
    files = [FileName.parse(PurePosixPath(file.relative).name) for file in Table(data).files()]
    assert sorted((name.start, name.end) for name in files if name) == [(0, 29), (30, 59)] and foreign not in files
    assert rows_once(str(data)) == 64 * 60


def test_the_dead_letters_of_flushes_another_engines_optimize_merged_stay_and_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Another engine's OPTIMIZE rewrote the ingester's files into one without offsets in its name (and
    dropped the empty file of the flush of a dead letter alone). Before, vacuum took the flush's
    dead-letter file for one of a flush never committed and removed it, and verify no longer listed
    the record set aside."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=34)
    append_bad_record(log)  # offset 30
    ingest_once(log, data, flush_rows=64 * 2)
    [letters] = (data / DEAD_LETTER_DIR).iterdir()
    name = FileName.parse(letters.name)
    assert name is not None and (name.start, name.end) == (30, 30)
    # the same flush written by a writer whose commit was refused, and a flush past the table's offsets
    refused = letters.with_name(FileName("log", 0, 30, 30, "0000000000aa").render("jsonl"))
    uncommitted = letters.with_name(FileName("log", 0, 31, 40, "0000000000bb").render("jsonl"))
    for copy in (refused, uncommitted):
        copy.write_bytes(letters.read_bytes())
    assert DeltaTable(str(data)).optimize.compact()["numFilesRemoved"] == 16
    hours_ago = time.time() - 3 * 3600
    for path in data.rglob("*"):
        os.utime(path, (hours_ago, hours_ago))

    assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "1"]) == 0
    assert sorted((data / DEAD_LETTER_DIR).iterdir()) == sorted([letters, refused])
    assert main(["verify", "--data", str(data)]) == 1  # the merged file's offsets cannot be checked
    out = capsys.readouterr().out
    assert "set aside: log partition 0: 1 record(s), offsets 30-30: outcome 1: unknown outcome kind code" in out
    assert rows_once(str(data)) == 64 * 30


def test_a_vacuum_while_optimize_merges_removes_nothing_it_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The merged file is written before the commit names it: a vacuum in between (its retention at
    the floor, 1 hour) leaves it, as it leaves an ingester's flush in flight; the files it merged stay
    for readers of the version before, until a later vacuum."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=33)
    ingest_once(log, data, flush_rows=64 * 2)
    flushes = {file.relative for file in Table(data).files()}
    table = Table(data)
    replace = table.replace

    def after_a_vacuum(removed: list[TableFile], added: list[DataFile]) -> None:
        assert main(["table", "vacuum", "--data", str(data), "--retention-hours", "1"]) == 0
        assert "removed 0 file(s)" in capsys.readouterr().out
        replace(removed, added)

    monkeypatch.setattr(table, "replace", after_a_vacuum)
    assert compact(table, target_rows=64 * 7).merged_files == 15
    assert_rows_once(data, 64 * 30)
    assert main(["verify", "--data", str(data)]) == 0
    merged = {file.relative for file in Table(data).files()}
    assert len(merged) == 5 and not merged & flushes
    assert {path.relative_to(data).as_posix() for path in data.glob(DATA_GLOB)} == flushes | merged


def test_two_optimizes_at_once_on_s3_merge_each_file_once(s3_url: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """As on disk: before, 80,000 rows for 40,000 in 3 of 3 trials on S3."""
    location = S3Location.parse(s3_url)
    write_load(tmp_path / "log", rows=64 * 30, seed=34)
    ingest_to_s3(tmp_path / "log", s3_url, tmp_path / "state", flush_rows=64 * 2)
    first, second = Table(location), Table(location)
    replace = second.replace

    def after_the_other(removed: list[TableFile], added: list[DataFile]) -> None:
        assert compact(first, target_rows=64 * 7).merged_files == 15
        replace(removed, added)

    monkeypatch.setattr(second, "replace", after_the_other)
    with pytest.raises(ReplaceRefused, match="15 of the 15 file"):
        compact(second, target_rows=64 * 7)
    assert rows_once(s3_url) == 64 * 30
    assert len(Table(location).files()) == 5


def test_optimize_gives_files_committed_without_statistics_theirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A table an older specmetrics wrote (add actions without statistics): optimize reads each file's
    footer and adds the file again with them, once; the rows stay what they were."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=33, step_ms=25.0)
    with monkeypatch.context() as old:
        old.setattr(FileStats, "json", lambda self: "{}")
        ingest_once(log, data, flush_rows=64 * 10)
    table = Table(data)
    assert [file.rows for file in table.files()] == [None] * 3
    since, until = T0 + timedelta(milliseconds=300), T0 + timedelta(milliseconds=400)
    assert len(table.files(since, until)) == 3  # without statistics every file may hold the window
    version = table.version()
    capsys.readouterr()
    assert main(["table", "optimize", "--data", str(data), "--target-rows", "1"]) == 0  # nothing to merge
    out, err = capsys.readouterr()
    assert "merged 0 file(s) into 0 (0 rows)" in out and "; 3 file(s) committed without statistics have them now" in out
    assert err.startswith("statistics from footers: 3/3 files (")  # the progress of a long read (S3: a request each)
    files = table.files()
    assert table.version() == version + 1 and len(files) == 3
    assert [(file.rows, file.first_event, file.last_event) for file in files] == [
        (stats.rows, stats.low[0], stats.high[0]) for stats in (FileStats.read(file.path) for file in files)]
    assert [file.rows for file in files] == [640] * 3
    assert len(table.files(since, until)) == 1
    assert_rows_once(data, 64 * 30)
    assert main(["verify", "--data", str(data)]) == 0
    assert main(["table", "optimize", "--data", str(data), "--target-rows", "1"]) == 0
    assert "without statistics" not in capsys.readouterr().out and table.version() == version + 1


def test_statistics_are_not_added_to_files_another_optimize_merged_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a file again that the table no longer holds would count its rows twice, beside its merged copy."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=34)
    with monkeypatch.context() as old:
        old.setattr(FileStats, "json", lambda self: "{}")
        ingest_once(log, data, flush_rows=64 * 10)
    read = FileStats.read
    merged: list[int] = []
    once = threading.Lock()

    def while_another_optimize_runs(*args: object) -> FileStats:
        with once:  # the footers are read in threads
            if not merged:
                merged.append(compact(Table(data), target_rows=64 * 30).merged_files)
        return read(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(FileStats, "read", while_another_optimize_runs)
    with pytest.raises(ReplaceRefused, match=r"3 of the 3 file\(s\) to add statistics to are no longer in the table"):
        Table(data).add_missing_statistics()
    assert merged == [3]
    assert_rows_once(data, 64 * 30)


def test_optimize_names_a_file_without_statistics_that_is_missing_or_damaged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=35)
    with monkeypatch.context() as old:
        old.setattr(FileStats, "json", lambda self: "{}")
        ingest_once(log, data, flush_rows=64 * 10)
    first, second = Table(data).files()[:2]
    content = first.path.read_bytes()
    first.path.unlink()
    version = Table(data).version()
    capsys.readouterr()
    assert main(["table", "optimize", "--data", str(data)]) == 4
    assert capsys.readouterr().err == (f"specmetrics table: error: {first.location}: named by the table's log, but "
                                       "missing; restore it from a copy of the table\n")
    first.path.write_bytes(content)
    second.path.write_bytes(second.path.read_bytes()[:-100] + bytes(100))  # the footer's end zeroed, same size
    assert main(["table", "optimize", "--data", str(data)]) == 4
    assert f"{second.location}: its footer does not decode" in capsys.readouterr().err
    assert Table(data).version() == version  # nothing committed


def test_maintain_optimizes_checkpoints_and_vacuums_on_its_schedule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``table maintain --every``, as the stack runs it: each run merges the small files (and rolls
    them up), checkpoints the log and removes the files no commit names past the retention; the numbers
    stay, the heartbeat counts the runs that succeeded."""
    log, data, beat = tmp_path / "log", tmp_path / "data", tmp_path / "maintain.heartbeat"
    write_load(log, rows=64 * 40, seed=33)
    ingest_once(log, data, flush_rows=64 * 5)
    before, files_before = numbers(data), len(Table(data).files())
    folder = Table(data).files()[0].path.parent
    young, old = folder / "unnamed-young.parquet", folder / "unnamed-old.parquet"
    for path, age_s in ((young, 10 * 60), (old, 2 * 3600)):
        path.write_bytes(b"PAR1")
        os.utime(path, (time.time() - age_s, time.time() - age_s))

    def more_steps(when: object) -> None:  # between the runs, an ingester writes on
        write_load(log, rows=64 * 10, seed=34, engine_prefix="more")
        ingest_once(log, data, flush_rows=64 * 5)

    monkeypatch.setattr(scheduled, "_sleep_until", more_steps)
    capsys.readouterr()
    assert main(["table", "maintain", "--data", str(data), "--target-rows", str(64 * 40), "--retention-hours", "1",
                 "--every", "6h", "--runs", "2", "--heartbeat-file", str(beat)]) == 0
    out = capsys.readouterr().out
    assert out.count(f"merged {files_before} file(s) into 1 (2,560 rows)") == 1
    assert out.count("merged 2 file(s) into 1 (640 rows)") == 1  # the second run: what came meanwhile
    assert out.count("checkpointed") == 2 and (data / LOG_DIR / "_last_checkpoint").exists()
    assert f"removed {old.relative_to(data).as_posix()}" in out and young.exists() and not old.exists()
    assert len(Table(data).files()) == 2 and check_rollups(data) == RollupCheck([], [])
    per_engine = numbers(data)[0]
    assert all(row in per_engine for row in before[0]) and len(per_engine) > len(before[0])  # and the "more" ones
    assert_rows_once(data, 64 * 50)
    assert json.loads(beat.read_text())["runs"] == 2


def test_maintain_refuses_a_risky_retention_and_logs_a_failed_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    assert main(["table", "maintain", "--data", str(data), "--retention-hours", "0.5"]) == 2
    assert "--retention-hours 0.5 is under 1: ingesters write meanwhile" in capsys.readouterr().err
    data.mkdir()
    assert main(["table", "maintain", "--data", str(data)]) == 2  # once: the error is the exit code
    assert f"{data} is not a table" in capsys.readouterr().err
    beat = tmp_path / "beat"
    assert main(["table", "maintain", "--data", str(data), "--every", "1h", "--runs", "1",
                 "--heartbeat-file", str(beat)]) == 1
    assert f"table maintain run failed (the next one still runs): ValueError: {data} is not a table" in caplog.text
    assert main(["table", "maintain", "--data", str(tmp_path / "later"), "--every", "1h", "--runs", "1"]) == 1
    assert "FileNotFoundError: data directory" in caplog.text  # a run of the schedule, not the command's end
    assert not beat.exists()
