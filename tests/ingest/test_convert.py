"""A tree made a table in place (``specmetrics table convert``) reads as before and resumes where
it would have; a table's upkeep (``vacuum``, ``checkpoint``) removes only what no commit names."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from specmetrics.cli import main
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, STATE_DIR, FileName
from specmetrics.storage.parquet import FileStats
from specmetrics.storage.table import LOG_DIR, Table, is_table
from tests.support.ingest import append_bad_record, assert_rows_once, ingest_once, ingest_tree_once
from tests.support.loadgen import write_load
from tests.support.readers import numbers, report


def test_a_converted_tree_reads_as_before_and_ingesting_goes_on_into_the_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 60, seed=21, engines=2)
    ingest_tree_once(log, data, flush_rows=64 * 25)
    append_bad_record(log)  # a flush of one dead letter: a dead-letter file and no data file
    ingest_tree_once(log, data)
    ingested = data.with_name("data.table")  # the table the tree was laid out from: what it holds
    before_report, before = report(ingested, tmp_path / "before"), numbers(ingested)
    first = sorted(data.glob(DATA_GLOB))[0]
    forged = first.with_name(FileName("log", 0, 61, 70).render("parquet"))
    pq.write_table(pq.read_table(first), forged)  # a copy under the next offsets' name: readers leave it out
    assert main(["verify", "--data", str(data)]) == 2  # a tree is not read
    assert "'specmetrics table convert --data" in capsys.readouterr().err

    assert main(["table", "convert", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "4 data file(s) committed (1 without rows, for flushes of dead letters only), 1 file(s) readers leave " \
           "out not committed" in out
    assert "log partition 0: next offset 61" in out
    assert is_table(data)
    committed = Table(data).files()
    assert [(file.rows, file.first_event, file.last_event) for file in committed] == [  # each file's statistics
        (stats.rows, *((stats.low[0], stats.high[0]) if stats.rows else (None, None)))
        for stats in (FileStats.read(file.path) for file in committed)]
    assert sorted(file.rows for file in committed) == [0, 64 * 10, 64 * 25, 64 * 25]
    assert numbers(data) == before
    assert report(data, tmp_path / "after") == before_report
    assert main(["verify", "--data", str(data)]) == 3  # clean but for the dead letter, which stays set aside
    out = capsys.readouterr().out
    assert "set aside: log partition 0: 1 record(s), offsets 60-60" in out
    assert f"not in the table's log (never read): {forged.relative_to(data)}" in out

    write_load(log, rows=64 * 10, seed=22, engine_prefix="more")
    assert ingest_once(log, data, flush_rows=64 * 4).rows == 64 * 10  # a table stays a table
    assert Table(data).position("log", 0) == 71
    assert_rows_once(data, 64 * 70)
    assert main(["table", "convert", "--data", str(data)]) == 2
    assert "is a table already" in capsys.readouterr().err


def test_a_tree_an_ingester_holds_is_not_converted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=640, seed=23)
    ingest_tree_once(log, data)
    source = LocalLogSource(log, data / STATE_DIR)  # a running ingester holds its source's lock
    try:
        assert main(["table", "convert", "--data", str(data)]) == 2
    finally:
        source.close()
    assert f"an ingester (pid {os.getpid()}) holds {data / STATE_DIR / 'log.lock'}" in capsys.readouterr().err
    assert not is_table(data)
    assert main(["table", "convert", "--data", str(data)]) == 0


def stored(data: Path) -> list[tuple[Path, int]]:
    """The tree's files (its state folder aside) with their modification times."""
    return sorted((path, path.stat().st_mtime_ns) for path in data.rglob("*") if STATE_DIR not in path.parts)


def test_ingest_refuses_a_tree_naming_the_conversion_and_changes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 20, seed=24)
    ingest_tree_once(log, data, flush_rows=64 * 10)
    write_load(log, rows=64 * 10, seed=25, engine_prefix="more")
    before = stored(data)
    assert main(["ingest", "--source", log.as_uri(), "--out", str(data), "--once", "--quiet"]) == 2
    assert f"{data} holds a tree of Parquet files, not a Delta table: 'specmetrics table convert {data}' makes it " \
           "a table" in capsys.readouterr().err
    assert stored(data) == before
    assert main(["table", "convert", "--data", str(data)]) == 0
    assert ingest_once(log, data).rows == 64 * 10
    assert_rows_once(data, 64 * 30)


def test_vacuum_removes_only_old_files_no_commit_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 20, seed=26)
    ingest_once(log, data, flush_rows=64 * 10)
    committed = sorted(file.path for file in Table(data).files())
    stray = committed[0].with_name(FileName("log", 0, 20, 29, "00000000000a").render("parquet"))
    stray.write_bytes(committed[0].read_bytes())
    letters = data / DEAD_LETTER_DIR / FileName("log", 0, 20, 29, "00000000000a").render("jsonl")
    letters.parent.mkdir(exist_ok=True)
    letters.write_text("{}\n")
    young = committed[0].with_name(FileName("log", 0, 20, 29, "00000000000b").render("parquet"))
    young.write_bytes(b"being written")
    old = time.time() - 200 * 3600
    for path in (stray, letters, *committed):
        os.utime(path, (old, old))
    assert main(["table", "vacuum", "--data", str(data), "--dry-run"]) == 0
    assert "would remove 2 file(s) no commit names, older than 168 h" in capsys.readouterr().out
    assert stray.exists() and letters.exists()
    assert main(["table", "vacuum", "--data", str(data)]) == 0
    assert not stray.exists() and not letters.exists() and young.exists()
    assert all(path.exists() for path in committed)
    assert_rows_once(data, 64 * 20)


def test_a_checkpoint_keeps_what_the_table_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=27)
    ingest_once(log, data, flush_rows=64 * 3)
    before = numbers(data)
    assert main(["table", "checkpoint", "--data", str(data)]) == 0
    assert "checkpointed" in capsys.readouterr().out
    assert list((data / LOG_DIR).glob("*.checkpoint.parquet"))
    assert Table(data).position("log", 0) == 30
    assert numbers(data) == before
    assert main(["table", "vacuum", "--data", str(tmp_path / "nothing")]) == 2
