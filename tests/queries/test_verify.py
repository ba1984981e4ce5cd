"""``specmetrics verify`` of a table: gaps, overlaps and duplicate events are found and fail the exit code."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from specmetrics.cli import main
from specmetrics.queries.verify import verify_table
from specmetrics.schemas.wire import step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB, FileName
from specmetrics.storage.table import DataFile, Table
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event
from tests.support.ingest import copy_under_another_attempt, ingest_once, rollup_path
from tests.support.loadgen import write_load


@pytest.fixture
def tree(log_dir: Path, data_dir: Path) -> Path:
    """A table of 4 flushes of 25 steps."""
    write_load(log_dir, rows=6_400, seed=2)  # 100 steps of 64
    ingest_once(log_dir, data_dir, flush_rows=1_600)
    return data_dir


def files(tree: Path) -> list[Path]:
    return sorted(tree.glob(DATA_GLOB))


def test_a_clean_tree_passes(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = verify_table(tree)
    assert [(p.source, p.partition, p.first, p.last, p.flushes) for p in report.partitions] == [("log", 0, 0, 99, 4)]
    assert report.clean
    assert main(["verify", "--data", str(tree)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("clean")


def test_the_long_steps_tell_their_progress_file_by_file(tree: Path) -> None:
    """Pages decoded and rollups recomputed take most of a large table's verify: each says how many of
    its files are done (on stderr, as other long commands do)."""
    said: list[tuple[str, int, int]] = []
    assert main(["rollup", "--data", str(tree)]) == 0
    assert verify_table(tree, progress=lambda *step: said.append(step)).clean
    assert said == [("pages", done, 4) for done in range(1, 5)] + [("rollups", done, 4) for done in range(1, 5)]


def test_a_flush_of_steps_without_outcomes_leaves_no_gap(log_dir: Path, data_dir: Path) -> None:
    times = [T0, T0 + timedelta(minutes=12), T0 + timedelta(minutes=24)]  # each step its own file (10 minutes)
    LocalLogWriter(log_dir).append([
        step_event_to_wire(step_event(None if i != 1 else [], event_id=f"e{i}", event_time=t))
        for i, t in enumerate(times)
    ])
    stats = ingest_once(log_dir, data_dir, flush_event_time_s=600)
    assert (stats.rows, stats.files) == (8, 3)
    assert [pq.read_metadata(f).num_rows for f in files(data_dir)] == [4, 0, 4]
    report = verify_table(data_dir)
    assert [(p.first, p.last, p.flushes, p.gaps) for p in report.partitions] == [(0, 2, 3, [])]
    assert report.clean
    assert main(["rollup", "--data", str(data_dir)]) == 0
    assert verify_table(data_dir).rollups.clean


def test_records_set_aside_are_counted_by_source_and_reason_with_their_own_exit_code(
        log_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tree whose every offset is accounted for but some records went to the dead letters is clean
    and says so apart: exit code 3, the records per source partition and reason, in text and JSON."""
    good = [step_event_to_wire(step_event(event_id=f"e{i}")) for i in range(4)]
    LocalLogWriter(log_dir).append([good[0], b"\x00not msgpack", good[1], b"\x01neither", good[2], good[3]])
    ingest_once(log_dir, data_dir)
    report = verify_table(data_dir)
    assert report.clean
    assert [(g.source, g.partition, g.records, g.first, g.last) for g in report.set_aside] == [("log", 0, 2, 1, 3)]
    assert "msgpack" in report.set_aside[0].reason
    assert main(["verify", "--data", str(data_dir)]) == 3
    out = capsys.readouterr().out
    assert "set aside: log partition 0: 2 record(s), offsets 1-3: " in out
    assert out.rstrip().endswith(f"clean, but 2 record(s) set aside as dead letters (their bytes are in "
                                 f"{data_dir / '_dead_letter'})")
    assert main(["verify", "--data", str(data_dir), "--json"]) == 3
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["clean"] and [g["records"] for g in as_json["set_aside"]] == [2]


def test_a_missing_file_is_a_gap(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files(tree)[1].unlink()
    report = verify_table(tree)
    assert report.partitions[0].gaps == [(25, 49)] and not report.clean
    assert main(["verify", "--data", str(tree)]) == 1
    assert "gap: log partition 0 offsets 25-49 are missing" in capsys.readouterr().out


def test_a_copy_is_not_read_unless_committed_then_an_overlap_counted_twice(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = files(tree)[0]
    name = FileName.parse(first.name)
    assert name is not None
    renamed = first.with_name(FileName("log", 0, 10, 30, "0123456789ab").render("parquet"))
    shutil.copy(first, renamed)
    report = verify_table(tree)
    assert report.partitions[0].overlaps == [] and report.uncommitted == [str(renamed.relative_to(tree))]
    assert report.duplicate_events == report.rows_twice == 0 and report.clean  # readers take the committed files only
    Table(tree).replace([], [DataFile.local(tree, renamed)])  # committed by hand, as no writer of specmetrics does
    report = verify_table(tree)
    assert report.partitions[0].overlaps == [(10, 24), (25, 30)]
    assert report.rows_twice == 25 * 64 and not report.clean
    assert main(["verify", "--data", str(tree)]) == 1
    out = capsys.readouterr().out
    assert "overlap: log partition 0 offsets 10-24 are stored twice" in out and out.rstrip().endswith("NOT clean")


def test_an_empty_or_missing_tree_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--data", str(tmp_path)]) == 1
    assert "nothing to verify" in capsys.readouterr().out
    assert main(["verify", "--data", str(tmp_path / "missing")]) == 2


def test_rollups_unequal_fail_rollup_rewrites_them_and_vacuum_removes_orphans(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = files(tree)
    rollups = [rollup_path(tree, f) for f in data]
    relative = [str(f.relative_to(tree)) for f in data]
    assert verify_table(tree).rollups.missing == relative and verify_table(tree).clean  # not built yet: no error
    assert main(["rollup", "--data", str(tree)]) == 0
    assert f"wrote {len(data)} rollup(s)" in capsys.readouterr().out
    assert all(r.exists() for r in rollups) and verify_table(tree).rollups.missing == []
    rollups[0].unlink()
    shutil.copy(data[1], rollups[1])  # not a rollup at all
    pq.write_table(pq.read_table(rollups[2]).slice(1), rollups[2])  # one count lost
    orphan = rollups[3].with_name("log-0-00000000000000000100-00000000000000000101.parquet")
    shutil.copy(rollups[3], orphan)
    check = verify_table(tree).rollups
    assert check.missing == [relative[0]]
    assert check.unequal == [relative[1], relative[2]]
    assert main(["verify", "--data", str(tree)]) == 1
    out = capsys.readouterr().out
    assert orphan.name not in out  # a rollup without a committed data file is never read
    assert "data files without a rollup yet: 1" in out and f"rollup not equal to its data file's rows: " \
        f"{relative[2]}" in out and "NOT clean" in out
    assert main(["rollup", "--data", str(tree), "--rebuild"]) == 0
    assert orphan.exists()  # not read: table vacuum removes it
    assert main(["table", "vacuum", "--data", str(tree), "--retention-hours", "0", "--force"]) == 0
    assert f"removed {orphan.relative_to(tree).as_posix()}\n" in capsys.readouterr().out and not orphan.exists()
    assert verify_table(tree).clean and not verify_table(tree).rollups.missing


def test_rows_a_table_counts_twice_are_found(log_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A flush's file committed a second time under another attempt token (as two optimizes at once
    committed their merged copies): offsets covered once, event ids at one position each, so verify
    said clean while readers counted each row of the file twice."""
    write_load(log_dir, rows=6_400, seed=2)
    ingest_once(log_dir, data_dir, flush_rows=1_600)
    table = Table(data_dir)
    first = table.files()[0]
    copy = copy_under_another_attempt(first.path)
    table.replace([], [DataFile.local(data_dir, copy)])
    report = verify_table(data_dir)
    assert report.rows_twice == pq.read_metadata(first.path).num_rows == 1_600
    assert report.duplicate_events == 0 and not any(p.overlaps for p in report.partitions)
    assert not report.clean
    assert main(["verify", "--data", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert "rows counted twice: 1,600 (the same rows of one offset in several data files" in out
    assert out.rstrip().endswith("NOT clean")


def test_files_another_application_merged_are_named_not_nothing_to_verify(
        log_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """delta-rs's own optimize merged the ingester's files into one named part-...: verify said "nothing
    to verify: no ingested files" over 6,400 rows."""
    write_load(log_dir, rows=6_400, seed=2)
    ingest_once(log_dir, data_dir, flush_rows=1_600)
    DeltaTable(str(data_dir)).optimize.compact()
    [merged] = [file.relative for file in Table(data_dir).files()]
    report = verify_table(data_dir)
    assert report.foreign == [merged] and not report.clean and report.rows_twice == 0
    assert main(["verify", "--data", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert f"files another application wrote: 1 of the table's data files carry no offsets in their names (another " \
           f"engine's OPTIMIZE writes such: Spark's, delta-rs's; {merged}, ...)" in out
    assert "'specmetrics table optimize' writes their rows again under names that carry the offsets" in out
    assert "nothing to verify" not in out
