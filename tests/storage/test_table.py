"""A table's log decides what is stored (storage.table): a commit names a flush's files and sets its
partition's next offset; a commit from where the table does not end is refused."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA, schema_before
from specmetrics.storage.layout import FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import TABLE_SCHEMA, CommitRefused, DataFile, Table, app_id, is_table


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
    return DataFile(relative, location.filesystem().get_file_info(location.key(relative)).size)


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
