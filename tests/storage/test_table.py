"""A table's log decides what is stored (storage.table): a commit names a flush's files and sets its
partition's next offset; a commit from where the table does not end is refused."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.transaction import AddAction

from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA, schema_before
from specmetrics.storage.layout import FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.parquet import FileStats
from specmetrics.storage.table import TABLE_SCHEMA, CommitRefused, DataFile, Table, app_id, is_table
from tests.support.events import T0
from tests.support.ingest import ingest_once
from tests.support.loadgen import write_load


def flush_file(root: Path, name: FileName, dt: str = "2026-12-01", hour: str = "07",
               schema: pa.Schema = REQUEST_STEP_SCHEMA) -> Path:
    path = root / f"dt={dt}" / f"hour={hour}" / name.render("parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(schema.empty_table(), path)
    return path


def test_a_commit_names_the_flushs_files_and_sets_where_the_partition_ends(tmp_path: Path) -> None:
    table = Table(tmp_path, create=True)
    assert is_table(tmp_path)
    assert table.position("log", 0) is None
    first = FileName("log", 0, 0, 9, "0123456789ab")
    committed = flush_file(tmp_path, first)
    uncommitted = flush_file(tmp_path, FileName("log", 0, 10, 19, "0123456789ac"))
    table.commit(first, [DataFile.local(tmp_path, committed)])
    assert table.position("log", 0) == 10
    assert table.position("log", 1) is None
    assert [file.path for file in table.files()] == [committed]
    assert uncommitted.exists()
    # Spark and other Delta readers see the same: one file, the offset under the partition's app id.
    delta = DeltaTable(str(tmp_path))
    assert delta.file_uris() == [str(committed)]
    assert delta.transaction_version(app_id("log", 0)) == 10
    assert delta.schema().to_arrow().names[-2:] == ["dt", "hour"]


def test_a_writer_adds_the_columns_of_later_minor_versions_to_an_older_table_s_schema(tmp_path: Path) -> None:
    """A table made before schema 1.5 has no seq_len: the next writer to open it adds the column to
    the table's schema (Delta readers then see it, null in the rows before), once."""
    old = pa.schema([field for field in TABLE_SCHEMA if field.name != "seq_len"])
    DeltaTable.create(str(tmp_path), old, partition_by=["dt", "hour"], name="request_outcomes")
    name = FileName("log", 0, 0, 9, "0123456789ab")
    path = flush_file(tmp_path, name, schema=schema_before("1.5"))
    Table(tmp_path).commit(name, [DataFile.local(tmp_path, path)])
    assert "seq_len" not in DeltaTable(str(tmp_path)).schema().to_arrow().names  # a reader adds nothing
    table = Table(tmp_path, create=True)
    delta = DeltaTable(str(tmp_path))
    assert delta.schema().to_arrow().names[-1] == "seq_len" and delta.version() == 2
    Table(tmp_path, create=True)
    assert DeltaTable(str(tmp_path)).version() == 2  # nothing left to add
    later = FileName("log", 0, 10, 19, "0123456789ac")
    table.commit(later, [DataFile.local(tmp_path, flush_file(tmp_path, later))])
    assert sorted(file.relative for file in table.files()) == [f"dt=2026-12-01/hour=07/{n.render('parquet')}"
                                                               for n in (name, later)]
    assert table.position("log", 0) == 20


def test_a_commit_from_where_the_table_does_not_end_is_refused_with_where_it_ends(tmp_path: Path) -> None:
    table = Table(tmp_path, create=True)
    name = FileName("log", 2, 0, 9, "0123456789ab")
    table.commit(name, [DataFile.local(tmp_path, flush_file(tmp_path, name))])
    for start in (0, 5, 11):  # again, from inside the flush, past its end
        late = FileName("log", 2, start, start + 9, "0123456789ac")
        with pytest.raises(CommitRefused, match=f"next offset of partition 2 of log is 10, not {start}") as refused:
            table.commit(late, [DataFile.local(tmp_path, flush_file(tmp_path, late))])
        assert refused.value.position == 10
    assert len(table.files()) == 1
    assert table.position("log", 2) == 10


def test_two_writers_racing_for_the_same_offsets_commit_once(tmp_path: Path) -> None:
    """Both read the table before either commits (the check passes for both): the log's own
    conflict check refuses the second commit of the partition's application transaction."""
    Table(tmp_path, create=True)
    first, second, third = Table(tmp_path), Table(tmp_path), Table(tmp_path)
    positions = iter([None, 10])  # what the second writer read before the first committed, then after
    second.position = lambda source, partition: next(positions)  # type: ignore[method-assign]
    name_a, name_b = FileName("log", 0, 0, 9, "0123456789ab"), FileName("log", 0, 0, 9, "0123456789ac")
    path_a, path_b = flush_file(tmp_path, name_a), flush_file(tmp_path, name_b)
    first.commit(name_a, [DataFile.local(tmp_path, path_a)])
    with pytest.raises(CommitRefused, match="lost to another writer") as refused:
        second.commit(name_b, [DataFile.local(tmp_path, path_b)])
    assert refused.value.position == 10
    assert [file.path for file in Table(tmp_path).files()] == [path_a]
    # A writer of another partition, whose view of the log is as old, commits beside them.
    third.position = lambda source, partition: None  # type: ignore[method-assign]
    other = FileName("log", 1, 0, 4, "0123456789ad")
    third.commit(other, [DataFile.local(tmp_path, flush_file(tmp_path, other))])
    assert (Table(tmp_path).position("log", 0), Table(tmp_path).position("log", 1)) == (10, 5)


def test_files_of_a_window_of_days(tmp_path: Path) -> None:
    table = Table(tmp_path, create=True)
    for day, offset in (("2026-11-30", 0), ("2026-12-01", 10), ("2026-12-02", 20)):
        name = FileName("log", 0, offset, offset + 9, f"0123456789{offset:02d}")
        table.commit(name, [DataFile.local(tmp_path, flush_file(tmp_path, name, dt=day))])
    days = [file.dt for file in table.files(datetime(2026, 12, 1, 23), datetime(2026, 12, 2))]
    assert sorted(days) == ["2026-12-01", "2026-12-02"]
    assert sorted(file.dt for file in table.files(until=datetime(2026, 11, 30))) == ["2026-11-30"]


def test_the_tables_columns_are_the_stored_steps_and_the_partition_keys(tmp_path: Path) -> None:
    Table(tmp_path, create=True)
    schema = DeltaTable(str(tmp_path)).schema().to_arrow()
    assert pa.schema(schema).names == [*REQUEST_STEP_SCHEMA.names, "dt", "hour"]


def s3_flush_file(location: S3Location, name: FileName) -> DataFile:
    relative = f"dt=2026-12-01/hour=07/{name.render('parquet')}"
    pq.write_table(REQUEST_STEP_SCHEMA.empty_table(), location.key(relative), filesystem=location.filesystem())
    return DataFile(relative, location.filesystem().get_file_info(location.key(relative)).size, FileStats(0))


def test_a_table_on_s3_commits_and_refuses_as_a_local_one(s3_url: str) -> None:
    location = S3Location.parse(s3_url)
    table = Table(location, create=True)
    assert is_table(location)
    racing = Table(location)  # reads the log before the first commit
    name = FileName("log", 0, 0, 9, "0123456789ab")
    table.commit(name, [s3_flush_file(location, name)])
    assert Table(location).position("log", 0) == 10
    committed = f"{s3_url}/dt=2026-12-01/hour=07/{name.render('parquet')}"
    assert [file.location for file in Table(location).files()] == [committed]
    racing.position = lambda source, partition: None  # type: ignore[method-assign]
    late = FileName("log", 0, 0, 9, "0123456789ac")
    with pytest.raises(CommitRefused):  # the store's conditional write and Delta's conflict check
        racing.commit(late, [s3_flush_file(location, late)])
    assert len(Table(location).files()) == 1


def test_a_table_on_s3_with_wrong_credentials_or_no_bucket_is_a_clear_error(
        s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETRICS_S3_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(OSError) as wrong:
        Table(S3Location.parse(s3_url), create=True)
    assert "not-the-secret" not in str(wrong.value)
    monkeypatch.undo()
    with pytest.raises(OSError):
        Table(S3Location.parse("s3://no-such-bucket-for-specmetrics/data"), create=True)


@pytest.mark.parametrize(("partition_by", "columns", "what"), [
    (["x"], {"x": [1], "y": [2]}, "partitioned by x, not dt, hour"),
    (["dt", "hour"], {"dt": ["2026-12-01"], "hour": ["07"], "value": [1]},
     "without the columns event_id, engine_id, request_id, kind, event_time"),
])
def test_another_applications_delta_table_is_refused_in_one_line(
        partition_by: list[str], columns: dict[str, list[object]], what: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """It was a KeyError traceback ('Field "partition.dt" does not exist in schema') from ingest."""
    from deltalake import write_deltalake

    from specmetrics.cli import main
    from tests.support.loadgen import write_load

    foreign = tmp_path / "foreign"
    write_deltalake(str(foreign), pa.table(columns), partition_by=partition_by)
    write_load(tmp_path / "log", rows=64, seed=1)
    for command in (["ingest", "--source", (tmp_path / "log").as_uri(), "--out", str(foreign), "--once", "--quiet"],
                    ["sql", "--data", str(foreign), "SELECT count(*) FROM request_steps"],
                    ["table", "optimize", "--data", str(foreign)]):
        capsys.readouterr()
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert f"{foreign} holds a Delta table another application wrote ({what}): not a table of step events" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert DeltaTable(str(foreign)).version() == 0  # nothing written to it


def test_each_commit_records_its_files_rows_and_bounds_and_readers_skip_files_by_them(tmp_path: Path) -> None:
    """Delta's file statistics: the rows, and the least and greatest event time (to the millisecond:
    rounded down and up), partition and offset of each data file, as an ingester commits them."""
    log, data = tmp_path / "log", tmp_path / "data"
    # steps 25 ms apart with 750 µs past the millisecond, across an hour: files in two hour folders
    write_load(log, rows=64 * 40, seed=5, step_ms=25.0, start_time=T0 - timedelta(milliseconds=500, microseconds=250))
    ingest_once(log, data, flush_rows=64 * 10)
    actions = pa.table(DeltaTable(str(data)).get_add_actions(flatten=True)).to_pylist()
    assert len(actions) == 5  # four flushes, one of them in two hours
    for action in actions:
        rows = pq.read_table(data / action["path"], columns=["event_time", "log_partition", "log_offset"])
        first, last = (value.as_py() for value in pc.min_max(rows["event_time"]).values())
        assert first.microsecond % 1000 == 750
        assert action["num_records"] == rows.num_rows > 0
        assert (action["min.event_time"], action["max.event_time"]) == (
            first - timedelta(microseconds=750), last + timedelta(microseconds=250))
        assert (action["min.log_offset"], action["max.log_offset"]) == \
            tuple(value.as_py() for value in pc.min_max(rows["log_offset"]).values())
        assert action["min.log_partition"] == action["max.log_partition"] == 0
        assert FileStats.read(data / action["path"]) == FileStats.of(rows)  # what convert takes from the footer

    table = Table(data)
    since, until = T0 + timedelta(milliseconds=100), T0 + timedelta(milliseconds=400)
    assert [(file.rows, file.first_event, file.last_event) for file in table.files()] == [
        (action["num_records"], action["min.event_time"], action["max.event_time"]) for action in actions]
    window = table.files(since, until)
    assert 0 < len(window) < len(actions)
    in_window = (pc.field("event_time") >= pa.scalar(since.replace(tzinfo=None), pa.timestamp("us"))) & \
        (pc.field("event_time") < pa.scalar(until.replace(tzinfo=None), pa.timestamp("us")))
    wanted = sum(pq.read_table(file.path, filters=in_window).num_rows for file in table.files())
    assert wanted == sum(pq.read_table(file.path, filters=in_window).num_rows for file in window) == 64 * 12
    # delta-rs (and Polars, which reads through it) skip the same files by the same statistics
    fragments = DeltaTable(str(data)).to_pyarrow_dataset().get_fragments(filter=in_window)
    assert sorted(Path(fragment.path).name for fragment in fragments) == sorted(file.path.name for file in window)
    assert table.rows(window[0]) == window[0].rows


def test_a_file_committed_without_statistics_is_in_every_window(tmp_path: Path) -> None:
    """Files of tables committed before their commits carried statistics, or by other writers."""
    Table(tmp_path, create=True)
    name = FileName("log", 0, 0, 9, "0123456789ab")
    path = flush_file(tmp_path, name)
    DeltaTable(str(tmp_path)).create_write_transaction(
        [AddAction(path.relative_to(tmp_path).as_posix(), path.stat().st_size, {"dt": "2026-12-01", "hour": "07"},
                   0, True, "{}")], "append", TABLE_SCHEMA, partition_by=["dt", "hour"])
    table = Table(tmp_path)
    [file] = table.files(datetime(2026, 12, 1, 9), datetime(2026, 12, 1, 10))
    assert (file.rows, file.first_event, file.last_event) == (None, None, None)
    assert table.rows(file) == 0  # from the footer
    assert table.files(datetime(2026, 12, 2), None) == []  # a day outside the window: still skipped


def test_times_are_rounded_outwards_to_the_millisecond_and_none_past_the_year_9999() -> None:
    late = datetime(9999, 12, 31, 23, 59, 59, 999_999)
    stats = json.loads(FileStats(2, (datetime(2026, 12, 1, 7, 0, 0, 1), 0, 5), (late, 0, 6)).json())
    assert stats == {"numRecords": 2, "minValues": {"event_time": "2026-12-01T07:00:00.000", "log_partition": 0,
                                                    "log_offset": 5},
                     "maxValues": {"log_partition": 0, "log_offset": 6},
                     "nullCount": {"event_time": 0, "log_partition": 0, "log_offset": 0}}
    assert json.loads(FileStats(0).json()) == {"numRecords": 0}


def test_a_footer_gives_the_bounds_over_every_row_group_or_the_rows_alone(tmp_path: Path) -> None:
    """What convert commits for a file of a tree: the footer's statistics, never the rows read again."""
    rows = pa.table({"event_time": pa.array([datetime(2026, 12, 1, 7, 0, 2), datetime(2026, 12, 1, 7, 0, 1),
                                             datetime(2026, 12, 1, 7, 0, 3)], pa.timestamp("us")),
                     "log_partition": pa.array([3, 3, 3], pa.int32()), "log_offset": [7, 9, 8]})
    pq.write_table(rows, tmp_path / "groups.parquet", row_group_size=2)
    assert FileStats.read(tmp_path / "groups.parquet") == FileStats.of(rows) == FileStats(
        3, (datetime(2026, 12, 1, 7, 0, 1), 3, 7), (datetime(2026, 12, 1, 7, 0, 3), 3, 9))
    pq.write_table(rows, tmp_path / "bare.parquet", write_statistics=False)
    assert FileStats.read(tmp_path / "bare.parquet") == FileStats(3)
    pq.write_table(rows.slice(0, 0), tmp_path / "empty.parquet")
    assert FileStats.read(tmp_path / "empty.parquet") == FileStats(0)
