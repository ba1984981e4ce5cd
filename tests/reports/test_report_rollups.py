"""The report from stored rollups equals the report from the raw rows, for any rows and any
window (bounds inside minutes included), and the command reads rollups only when they cover
the window."""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.queries.rollup import build_missing, rollups_cover
from specmetrics.reports import ReportData, Window, collect
from specmetrics.storage.layout import DATA_GLOB, ROLLUP_DIR
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import Table
from tests.support.ingest import ingest_once, ingest_to_s3
from tests.support.loadgen import write_load
from tests.support.outcomes import audited_outcome
from tests.support.readers import report

START = datetime(2025, 1, 1, 10, 58)
#: Event times over four minutes around an hour boundary, at second and sub-second offsets.
TIMES = st.builds(lambda ms: START + timedelta(milliseconds=ms), st.integers(0, 4 * 60_000 - 1))
BOUNDS = st.one_of(st.none(), TIMES, st.builds(lambda m: START + timedelta(minutes=m), st.integers(0, 4)))


def both(root: Path, window: Window, **widths: Any) -> tuple[ReportData, ReportData]:
    con = connect(root)
    try:
        return collect(con, window, **widths), collect(con, window, stored_rollups=True, **widths)
    finally:
        con.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(audited_outcome(), TIMES), min_size=1, max_size=30), BOUNDS, BOUNDS,
       st.sampled_from([None, timedelta(minutes=1), timedelta(minutes=2)]), st.sampled_from([256, 512]))
def test_the_report_from_rollups_equals_the_report_from_raw_rows(
        outcomes: Any, drawn: list[tuple[dict[str, Any], datetime]], since: datetime | None, until: datetime | None,
        bucket: timedelta | None, context_tokens: int) -> None:
    rows = [outcomes.row(**{**d, "event_time": t}) for d, t in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        root = outcomes.write_table(Path(tmp) / "data", rows)
        build_missing(root)
        con = connect(root)
        try:
            widths = {"bucket": bucket, "context_tokens": context_tokens}
            raw = collect(con, Window(since, until), **widths)
            stored = collect(con, Window(since, until), stored_rollups=True, **widths)
            per_request = [sorted(run_query(con, sql, {"t0": since, "t1": until}).to_pylist(),
                                  key=lambda r: [r[c] for c in ("engine_id", "model", "method", "num_spec_tokens",
                                                                 "request_id")])
                           for sql in ("SELECT * EXCLUDE (bucket_index) FROM request_counts(NULL, $t0, $t1)",
                                       "FROM request_counts_from_rollups(t0 := $t0, t1 := $t1)")]
        finally:
            con.close()
        assert stored == raw
        assert per_request[1] == per_request[0]
        inside = [r for r in rows if (since is None or r["event_time"] >= since)
                  and (until is None or r["event_time"] < until)]
        assert stored.request_steps == len(inside)  # a bug that drops or doubles the partial minutes shows here


@pytest.fixture
def tree(tmp_path: Path, outcomes: Any) -> Path:
    rows = [outcomes.drafted(3, a % 4, event_time=START + timedelta(seconds=7 * a), batch_max_seq_len=100 * a)
            for a in range(40)]
    root = outcomes.write_table(tmp_path / "data", rows)
    build_missing(root)
    return root


def double_the_counts(rollup: Path) -> None:
    """Request-steps in every row, and the draft tokens of each request, counted twice."""
    table = pq.read_table(rollup)
    for column in ("request_steps", "num_draft_tokens"):
        doubled = pc.multiply(table[column], pa.scalar(2, pa.int64()))
        table = table.set_column(table.schema.get_field_index(column), column, doubled)
    pq.write_table(table, rollup)


def test_the_stored_path_reads_the_rollups(tree: Path) -> None:
    minutes = timedelta(minutes=1)
    raw, stored = both(tree, Window(None, None), bucket=minutes)
    assert stored == raw and raw.request_steps == 40
    for rollup in (tree / ROLLUP_DIR).glob(DATA_GLOB):
        double_the_counts(rollup)
    raw, stored = both(tree, Window(None, None), bucket=minutes)
    assert (raw.request_steps, stored.request_steps) == (40, 80)
    # one request accepting 1.5 of 3 tokens a step: at half its rate, the sections about requests read the rollups
    assert [(r["lower_rate"], r["requests"]) for r in raw.histogram if r["requests"]] == [(0.5, 1)]
    assert [(r["lower_rate"], r["requests"]) for r in stored.histogram if r["requests"]] == [(0.2, 1)]
    assert both(tree, Window(None, None), bucket=timedelta(seconds=30))[1].histogram == stored.histogram
    assert both(tree, Window(None, None))[1].request_steps == 40  # under 10 minutes: seconds, from the raw rows
    # widths the rollups cannot give are computed from the raw rows
    assert both(tree, Window(None, None), bucket=timedelta(seconds=30))[1].request_steps == 40
    assert both(tree, Window(None, None), context_tokens=100)[1].request_steps == 40


def test_the_report_command_builds_the_rollups_it_lacks_and_reads_them_only_when_they_cover_the_window(
        tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def report(*extra: str) -> str:
        assert main(["report", "--data", str(tree), "--out", str(tmp_path / "r"), "--format", "md", "--bucket", "1m",
                     *extra]) == 0
        return capsys.readouterr().out

    rollups = sorted((tree / ROLLUP_DIR).glob(DATA_GLOB))
    assert len(rollups) == 2
    shutil.rmtree(tree / ROLLUP_DIR)
    assert "(40 request-steps)" in report()
    assert sorted((tree / ROLLUP_DIR).glob(DATA_GLOB)) == rollups  # built by the report
    double_the_counts(rollups[0])  # marks which path a report takes
    assert "(58 request-steps)" in report()  # the 18 rows before 11:00 counted twice: the rollups were read
    rollups[1].unlink()
    assert "(58 request-steps)" in report() and rollups[1].exists()  # rebuilt, and read
    assert "(40 request-steps)" in report("--raw")
    # 35 rows from 10:58:30: the 4 of the partial minute 10:58 from the raw rows, the 9 of 10:59 from the doubled
    # rollup, the 22 from 11:00 on from the other one
    assert "(44 request-steps)" in report("--since", "2025-01-01T10:58:30")
    assert main(["report", "--data", str(tree), "--out", str(tmp_path / "r"), "--format", "md",
                 "--since", "2025-01-02T00:00"]) == 1  # no file that day: covered, and empty
    capsys.readouterr()
    orphan = rollups[0].with_name("test-0-00000000000099999990-00000000000099999999.parquet")
    shutil.copy(rollups[0], orphan)
    assert rollups_cover(tree, since=START)  # a rollup without a committed data file is never read
    assert rollups_cover(tree, since=START - timedelta(days=2), until=START - timedelta(days=1))
    assert "(58 request-steps)" in report()


def test_a_report_of_a_window_rolls_up_only_the_files_that_may_hold_rows_of_it(
        tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """By the event times each commit records: the file of the rows before 11:00 is neither opened nor rolled up."""
    rollups = sorted((tree / ROLLUP_DIR).glob(DATA_GLOB))
    shutil.rmtree(tree / ROLLUP_DIR)
    assert main(["report", "--data", str(tree), "--out", str(tmp_path / "r"), "--format", "md", "--bucket", "1m",
                 "--since", "2025-01-01T11:00"]) == 0
    assert "(22 request-steps)" in capsys.readouterr().out
    assert sorted((tree / ROLLUP_DIR).glob(DATA_GLOB)) == rollups[1:]


def test_a_report_of_a_window_opens_no_data_file_outside_it(
        tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file of the rows before 11:00, its bytes garbled (its size kept): a report of the hour from
    11:00 reads the raw rows of that hour's file alone; the whole table's report names the damage."""
    [before, _] = sorted(tree.glob(DATA_GLOB))
    before.write_bytes(bytes(len(before.read_bytes())))

    def report(*extra: str) -> int:
        return main(["report", "--data", str(tree), "--out", str(tmp_path / "r"), "--format", "md", "--raw", *extra])

    assert report("--since", "2025-01-01T11:00") == 0
    assert "(22 request-steps)" in capsys.readouterr().out
    assert report() == 4
    assert f"{before.relative_to(tree)}" in capsys.readouterr().err


def test_a_rollup_written_before_the_audit_verdict_is_left_out_then_written_again(tree: Path) -> None:
    rollups = sorted((tree / ROLLUP_DIR).glob(DATA_GLOB))
    for rollup in rollups:  # the shape before vllm_counts_differ, counts doubled to tell it apart
        double_the_counts(rollup)
        pq.write_table(pq.read_table(rollup).drop_columns(["vllm_counts_differ"]), rollup)
    assert not rollups_cover(tree)
    assert [tree / rollup for rollup in sorted(build_missing(tree))] == rollups  # written again, in the current shape
    raw, stored = both(tree, Window(None, None), bucket=timedelta(minutes=1))
    assert stored == raw and stored.request_steps == 40
    assert [(r["audited_request_steps"], r["differing_request_steps"]) for r in stored.audit] == [(0, 0)]


def test_a_data_file_arriving_while_the_report_reads_rollups_sends_it_to_the_raw_rows(
        tree: Path, tmp_path: Path, outcomes: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    late = [outcomes.drafted(3, 1, event_time=START + timedelta(minutes=1, seconds=s)) for s in range(5)]
    arrived = []

    def collect_while_a_file_lands(*args: Any, **kwargs: Any) -> ReportData:
        if not arrived:  # the ingester commits a flush after the coverage check
            arrived.append(outcomes.write_table(tree, late))
        return collect(*args, **kwargs)

    monkeypatch.setattr("specmetrics.commands.report.collect", collect_while_a_file_lands)
    assert main(["report", "--data", str(tree), "--out", str(tmp_path / "r"), "--format", "md"]) == 0
    assert "(45 request-steps)" in capsys.readouterr().out  # without the re-read: 40, the new minute missing


def test_report_counts_from_rollups_refuses_widths_the_rollups_cannot_give(tree: Path) -> None:
    con = connect(tree)
    try:
        with pytest.raises(Exception, match="bucket must be a positive whole number of minutes"):
            con.sql("FROM report_counts_from_rollups(bucket := INTERVAL 90 SECOND)").fetchall()
        with pytest.raises(Exception, match="context_tokens must be a positive multiple of 256"):
            con.sql("FROM report_counts_from_rollups(context_tokens := 100)").fetchall()
    finally:
        con.close()


def test_rollups_on_s3_are_built_read_and_verified_as_on_disk(
        s3_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, location = tmp_path / "log", S3Location.parse(s3_url)
    write_load(log, rows=64 * 60, seed=33, engines=2)
    ingest_once(log, tmp_path / "local", flush_rows=64 * 10)
    ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=64 * 10)
    committed = len(Table(location).files())
    assert not rollups_cover(location)
    assert main(["rollup", "--data", s3_url]) == 0
    assert f"wrote {committed} rollup(s) under {s3_url}" in capsys.readouterr().out
    assert rollups_cover(location) and main(["rollup", "--data", s3_url]) == 0
    assert "wrote 0 rollup(s)" in capsys.readouterr().out
    assert main(["verify", "--data", s3_url]) == 0
    assert "data files without a rollup yet: 0" in capsys.readouterr().out

    window = Window(None, None)
    raw, stored = both(s3_url, window)  # type: ignore[arg-type]
    assert stored == raw and raw.request_steps == 64 * 60
    assert report(s3_url, tmp_path / "s3") == report(tmp_path / "local", tmp_path / "local-report")  # type: ignore[arg-type]

    first, second = (f"{ROLLUP_DIR}/{file.relative}" for file in Table(location).files()[:2])
    location.filesystem().copy_file(location.key(second), location.key(first))  # another file's counts
    assert main(["verify", "--data", s3_url]) == 1
    assert f"rollup not equal to its data file's rows: {first.removeprefix(ROLLUP_DIR + '/')}" in \
        capsys.readouterr().out

    write_load(log, rows=64 * 10, seed=34, engine_prefix="more")
    ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=64 * 10)
    assert not rollups_cover(location)
    assert main(["report", "--data", s3_url, "--out", str(tmp_path / "later"), "--format", "md"]) == 0
    assert rollups_cover(location)  # the report built the new file's rollup before it read
