"""The table's log is the truth: a lost, stale or wrong committed offset of a local log neither
removes a stored file nor stores a record twice; a tree's flush cut short between two of its
files is left out of its conversion and written again."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.cli import main
from specmetrics.ingest.convert import convert_tree
from specmetrics.schemas.wire import step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, FLUSH_FILES_KEY, STATE_DIR
from specmetrics.storage.table import LOG_DIR, Table, is_table
from specmetrics.transport.log import LocalLogWriter
from specmetrics.transport.log.segment import list_segments, segment_path
from tests.support.events import T0, step_event
from tests.support.ingest import assert_rows_once, ingest_once, ingest_tree_once, rows_once
from tests.support.loadgen import write_load

ROOT = Path(__file__).resolve().parents[2]


def identity(path: Path) -> tuple[int, int]:
    """Inode and modification time: a file written again (a new file renamed onto the name) has
    another, even where the file system reuses the inode number it just freed."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def stored_files(data_dir: Path) -> dict[str, tuple[int, int]]:
    """Every data and dead-letter file, by path, with its identity."""
    paths = [*data_dir.glob(DATA_GLOB), *(data_dir / DEAD_LETTER_DIR).glob("*.jsonl")]
    return {str(p.relative_to(data_dir)): identity(p) for p in paths}



def offsets_file(data_dir: Path) -> Path:
    return data_dir / STATE_DIR / "log.offsets.json"


def test_a_lost_offsets_file_keeps_every_stored_file_and_reads_only_what_is_new(log_dir: Path, data_dir: Path) -> None:
    first = write_load(log_dir, rows=6_000, seed=3, engine_prefix="first")
    ingest_once(log_dir, data_dir, flush_rows=2_000)
    before = stored_files(data_dir)
    offsets_file(data_dir).unlink()
    second = write_load(log_dir, rows=3_000, seed=4, engine_prefix="second")
    stats = ingest_once(log_dir, data_dir, flush_rows=2_000)
    assert stats.rows == sum(t.rows for t in second.values())  # only the new records were read
    after = stored_files(data_dir)
    assert {path: after.get(path) for path in before} == before  # not one stored file removed or rewritten
    assert_rows_once(data_dir, sum(t.rows for t in [*first.values(), *second.values()]))
    assert json.loads(offsets_file(data_dir).read_text()) == {"0": 94 + 47}


def test_a_stale_offsets_file_keeps_the_files_stored_after_it(log_dir: Path, data_dir: Path) -> None:
    truth = write_load(log_dir, rows=6_000, seed=3)
    ingest_once(log_dir, data_dir, flush_rows=2_000)
    before = stored_files(data_dir)
    offsets_file(data_dir).write_text(json.dumps({"0": 32}))  # an older commit (its later ones lost)
    assert ingest_once(log_dir, data_dir, flush_rows=2_000).rows == 0
    assert stored_files(data_dir) == before
    assert_rows_once(data_dir, sum(t.rows for t in truth.values()))


def test_pruned_segments_and_a_lost_offsets_file_keep_every_stored_row(log_dir: Path, data_dir: Path) -> None:
    writer = LocalLogWriter(log_dir, segment_bytes=4096)
    for i in range(60):
        writer.append([step_event_to_wire(step_event(event_id=f"e{i}", step_index=i))])
    ingest_once(log_dir, data_dir, flush_rows=40)
    segments = list_segments(log_dir)
    assert len(segments) > 2
    for base in segments[:-1]:  # retention removed all but the newest segment
        segment_path(log_dir, base).unlink()
    offsets_file(data_dir).unlink()
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", step_index=i)) for i in range(60, 70)])
    writer.close()
    before = stored_files(data_dir)
    assert ingest_once(log_dir, data_dir, flush_rows=40).rows == 40
    assert {path: stored_files(data_dir).get(path) for path in before} == before
    assert_rows_once(data_dir, 70 * 4)


def two_hour_log(log_dir: Path, steps: int, bad_every: int) -> int:
    """``steps`` step messages 20 minutes apart (a flush of them spans several hours), every
    ``bad_every``-th of them not a step message; returns the number of good rows."""
    writer = LocalLogWriter(log_dir)
    messages = [b"\x00not msgpack" if bad_every and i % bad_every == bad_every - 1 else
                step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(minutes=20 * i)))
                for i in range(steps)]
    writer.append(messages)
    writer.close()
    return 4 * sum(not m.startswith(b"\x00") for m in messages)


def flush_files_in_write_order(data_dir: Path) -> list[Path]:
    """The files of the tree's only flush, in the order the ingester writes them (hours, then dead letters)."""
    return [*sorted(data_dir.glob(DATA_GLOB)), *sorted((data_dir / DEAD_LETTER_DIR).glob("*.jsonl"))]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.integers(4, 12), bad_every=st.sampled_from([0, 3]), data=st.data())
def test_a_tree_whose_last_flush_a_crash_cut_short_is_converted_without_it_and_ingest_writes_it_again(
        tmp_path: Path, steps: int, bad_every: int, data: st.DataObject) -> None:
    case = tmp_path / f"case-{steps}-{bad_every}-{len(list(tmp_path.iterdir()))}"
    log_dir, data_dir = case / "log", case / "data"
    good_rows = two_hour_log(log_dir, steps, bad_every)
    ingest_tree_once(log_dir, data_dir, flush_event_time_s=86_400)
    written = flush_files_in_write_order(data_dir)
    assert len(written) > 1
    assert {int(pq.read_metadata(p).metadata[FLUSH_FILES_KEY.encode()]) for p in written if p.suffix == ".parquet"} \
        == {len(written)}
    kept = data.draw(st.integers(1, len(written) - 1), label="files renamed into place before the crash")
    for path in written[kept:]:
        path.unlink()
    offsets_file(data_dir).unlink()  # the commit never happened
    conversion = convert_tree(data_dir)
    assert (conversion.files, conversion.positions) == (0, {})  # the cut-short flush is not committed
    assert flush_files_in_write_order(data_dir) == written[:kept]  # its files stay, never read
    stats = ingest_once(log_dir, data_dir, flush_event_time_s=86_400)
    assert (stats.rows, stats.dead_letters) == (good_rows, steps // bad_every if bad_every else 0)
    assert_rows_once(data_dir, good_rows)


def test_a_tree_whose_flush_lacks_a_file_before_its_last_is_not_converted(
        log_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A flush before the last one of its partition that lacks a file (removed by hand, not a
    crash's cut: the offset ranges alone do not show it while its other file covers its offsets)."""
    two_hour_log(log_dir, steps=4, bad_every=0)
    ingest_tree_once(log_dir, data_dir, flush_event_time_s=86_400)
    writer = LocalLogWriter(log_dir)
    writer.append([step_event_to_wire(step_event(event_id="later", event_time=T0))])
    writer.close()
    ingest_tree_once(log_dir, data_dir)
    first_flush = sorted(data_dir.glob("dt=*/hour=*/log-0-00000000000000000000-*.parquet"))
    assert len(first_flush) == 2
    first_flush[1].unlink()
    assert main(["table", "convert", "--data", str(data_dir)]) == 2
    assert "holds flushes that lack some of their files before the last flush of their partition (log partition 0 " \
           "offsets 0-3): restore them before converting; nothing was changed" in capsys.readouterr().err
    assert not is_table(data_dir) and first_flush[0].exists()


def test_a_table_whose_last_commit_is_gone_reads_its_offsets_again(
        log_dir: Path, data_dir: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """The committed offset is past where the table's log ends: the table is the truth, and the offsets
    it lacks are read again (it was "the files of offsets ... are missing", exit 2, while the files
    were there and only the commit was not)."""
    rows = sum(t.rows for t in write_load(log_dir, rows=6_000, seed=4).values())
    assert ingest_once(log_dir, data_dir, flush_rows=2_000).rows == rows
    last = sorted((data_dir / LOG_DIR).glob("*.json"))[-1]
    last.unlink()
    short, kept = Table(data_dir).position("log", 0), rows_once(str(data_dir))
    assert short is not None and 0 < kept < rows
    assert main(["verify", "--data", str(data_dir)]) == 0  # a flush in flight: its commit may still come
    capsys.readouterr()
    for path in data_dir.glob(DATA_GLOB):  # older than any flush in flight
        os.utime(path, (time.time() - 2 * 3600, time.time() - 2 * 3600))
    assert main(["verify", "--data", str(data_dir)]) == 1  # it said clean
    assert f"commit missing: log partition 0 offsets {short}-93: their data files are there, but no commit of the " \
           "table's log names them" in capsys.readouterr().out
    with caplog.at_level(logging.WARNING):
        assert ingest_once(log_dir, data_dir, flush_rows=2_000).rows == rows - kept
    assert f"the committed offset 94 is past where {Table(data_dir).url}'s log ends (offset {short})" in caplog.text
    assert rows_once(str(data_dir)) == rows


def test_a_table_restored_to_an_older_version_reads_the_offsets_it_lost_again(
        log_dir: Path, data_dir: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """Delta's RESTORE keeps the newest application transaction: the log said offsets up to 93 were
    stored over 2,048 rows, and ingest resumed after them, never storing the rest again."""
    rows = sum(t.rows for t in write_load(log_dir, rows=6_000, seed=4).values())
    assert ingest_once(log_dir, data_dir, flush_rows=2_000).rows == rows
    DeltaTable(str(data_dir)).restore(2)  # the first flush's commit (after the creation and the claim of the log)
    kept = rows_once(str(data_dir))
    assert Table(data_dir).position("log", 0) == 94 and 0 < kept < rows
    assert main(["verify", "--data", str(data_dir)]) == 1  # it said clean
    assert "log ahead of the data: log partition 0: the table's log says offsets up to 93 are stored, its data " \
           "files end at offset 31" in capsys.readouterr().out
    with caplog.at_level(logging.WARNING):
        assert ingest_once(log_dir, data_dir, flush_rows=2_000).rows == rows - kept
    assert "'s log says offsets up to 93 are stored, but the data files it holds end at offset" in caplog.text
    assert rows_once(str(data_dir)) == rows
