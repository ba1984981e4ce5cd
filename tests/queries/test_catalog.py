"""connect(): the source view, the layered views, empty and missing trees, the lock-down."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specmetrics.queries import PUBLIC_MACROS, PUBLIC_VIEWS, SOURCE_VIEW, connect, describe_views, run_query, sql_files
from specmetrics.queries import catalog as catalog_module
from specmetrics.queries.catalog import (
    CATALOG_CACHE_ENV,
    catalog_file,
    catalog_version,
    create_catalog,
    load_catalog,
    rollup_schema,
)
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA, schema_before
from specmetrics.storage.layout import FileName
from tests.support.outcomes import commit_files


def test_missing_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(FileNotFoundError, match=r"data directory .*no-such-dir.* does not exist"):
        connect(missing)


def test_data_dir_that_is_a_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        connect(path)


def test_empty_data_dir_gives_empty_views_with_the_same_columns(tmp_path: Path, connect_rows: Any,
                                                                 outcomes: Any) -> None:
    (tmp_path / "empty" / "_dead_letter").mkdir(parents=True)
    (tmp_path / "empty" / "_state").mkdir()
    empty = connect(tmp_path / "empty")
    full = connect_rows([outcomes.drafted(3, 1), outcomes.k_zero("no_proposal")])
    try:
        relations = [f"{view}" for view in (SOURCE_VIEW, *PUBLIC_VIEWS)]
        relations += [f"{macro}(NULL, NULL)" for macro in PUBLIC_MACROS if macro.endswith("_between")]
        for relation in [*relations, "acceptance_timeline()"]:
            got = run_query(empty, f"SELECT * FROM {relation}")
            assert got.num_rows == (12 if relation == "baselines" else 0), relation  # reference data, not events
            assert got.schema == run_query(full, f"SELECT * FROM {relation}").schema, relation
    finally:
        empty.close()


def test_files_outside_the_partition_tree_are_ignored(tmp_path: Path, outcomes: Any) -> None:
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 1)])
    (root / "_dead_letter").mkdir()
    (root / "_dead_letter" / "local-0-00000000000000000000-00000000000000000001.jsonl").write_text("{}\n")
    (root / "_state").mkdir()
    (root / "_state" / "local.offsets.json").write_text("{}")
    part = next(root.glob("dt=*/hour=*"))
    (part / ".local-0-x.parquet.tmp").write_bytes(b"half a file")
    pq.write_table(pa.table({"x": [1]}), root / "stray.parquet")  # not in a partition folder
    con = connect(root)
    try:
        assert run_query(con, "SELECT count(*) AS n FROM request_steps").to_pylist() == [{"n": 1}]
    finally:
        con.close()


def test_files_added_after_connect_are_seen(tmp_path: Path, outcomes: Any) -> None:
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 1)])
    con = connect(root)
    try:
        outcomes.write_table(root, [outcomes.drafted(3, 2)])  # a later commit
        assert run_query(con, "SELECT num_drafts FROM acceptance").to_pylist() == [{"num_drafts": 2}]
    finally:
        con.close()


def test_the_command_line_reading_a_table_imports_neither_pandas_nor_the_event_models(
        tmp_path: Path, outcomes: Any) -> None:
    # pandas costs a fresh process 0.2-0.3 s (pa.table() of delta-rs's add actions imported it, and
    # pa.array() at the import of the ingester's batches), the pydantic event models 0.1 s (the
    # package specmetrics.schemas imported them for the Arrow schema): what `specmetrics report` or
    # `specmetrics sql` paid before its first query.
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 2)])
    program = ("import sys; from pathlib import Path; import specmetrics.cli; "
               "from specmetrics.queries import connect, run_query; "
               "from specmetrics.queries.rollup import rollups_cover; root = Path(sys.argv[1]); rollups_cover(root); "
               "con = connect(root); print(run_query(con, 'SELECT num_drafts FROM acceptance').to_pylist(), "
               "'pandas' in sys.modules, 'specmetrics.schemas.events' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", program, str(root)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[{'num_drafts':", "1}]", "False", "False"]


def source_sql(con: duckdb.DuckDBPyConnection) -> str:
    [(sql,)] = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = ?", [SOURCE_VIEW]).fetchall()
    return str(sql)


def commit_one(root: Path, outcomes: Any, table: pa.Table, offset: int) -> None:
    path = root / "dt=2025-01-01" / "hour=10" / FileName("old", 0, offset, offset).render("parquet")
    pq.write_table(table, path)
    commit_files(root, [path])


def test_files_of_an_older_schema_are_read_as_a_group_of_their_own_without_union_by_name(
        tmp_path: Path, outcomes: Any) -> None:
    # union_by_name makes DuckDB read every file's footer whenever a query binds the view (0.37 s a
    # query at 1,000 files): each group of files with the same columns is read as one, NULL where it
    # lacks a column.
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 2), outcomes.drafted(3, 1)])
    old = pa.Table.from_pylist([outcomes.drafted(3, 0, event_id="old", vllm_num_drafts=1)], schema=REQUEST_STEP_SCHEMA)
    commit_one(root, outcomes, old.select(schema_before("1.6").names), 50)
    con = connect(root)
    try:
        assert "union_by_name := true" not in source_sql(con) and source_sql(con).count("parquet_scan(") == 2
        assert run_query(con, "SELECT count(*) AS n, count(vllm_num_drafts) AS counted, sum(accepted) AS accepted "
                              "FROM request_steps").to_pylist() == [{"n": 3, "counted": 0, "accepted": 3}]
        # the columns in the order of the newest files, as a table of one schema has them
        assert con.sql(f"FROM {SOURCE_VIEW}").columns == [*REQUEST_STEP_SCHEMA.names, "dt", "hour"]
    finally:
        con.close()


def test_files_that_disagree_on_a_columns_type_are_read_by_name(tmp_path: Path, outcomes: Any) -> None:
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 2)])
    wider = pa.Table.from_pylist([outcomes.drafted(3, 1)], schema=REQUEST_STEP_SCHEMA)
    commit_one(root, outcomes, wider.set_column(wider.schema.get_field_index("accepted"), "accepted",
                                                wider["accepted"].cast(pa.int64())), 50)
    con = connect(root)
    try:
        assert "union_by_name := true" in source_sql(con)
        assert run_query(con, "SELECT sum(accepted) AS accepted FROM request_steps").to_pylist() == [{"accepted": 3}]
    finally:
        con.close()


def test_describe_views_lists_public_views_with_comments(connect_rows: Any, outcomes: Any) -> None:
    con = connect_rows([outcomes.drafted(3, 1)])
    described = describe_views(con)
    assert [name.split("(")[0] for name, _ in described] == [*PUBLIC_VIEWS, *PUBLIC_MACROS]
    assert dict(described)["acceptance_timeline(bucket, t0, t1)"]
    assert all(comment and len(comment) > 20 for _, comment in described)
    everything = dict(describe_views(con, include_internal=True))
    assert {SOURCE_VIEW, "outcome_histogram", "position_counts", "outcome_histogram_between(t0, t1)",
            *PUBLIC_VIEWS} <= set(everything)
    assert all(everything.values())


def test_sql_files_are_one_documented_view_or_macro_each() -> None:
    """A file NAME.sql defines the view NAME and its window macro NAME_between, or (staging: the
    view, and request_steps_between) the macro NAME alone, or (rollup) the view NAME alone; a
    definitions file defines scalar macros, each listed in its header; each one documented and
    commented."""
    root = resources.files("queries") / "sql"
    names = sql_files()
    assert [n.split("/")[0] for n in names] == sorted(
        (n.split("/")[0] for n in names),
        key=("definitions", "staging", "intermediate", "rollup", "metrics", "report").index)
    defined: set[str] = set()
    for name in names:
        text = (root / name).read_text(encoding="utf-8")
        stem = name.rsplit("/", 1)[1].removesuffix(".sql")
        assert text.startswith(f"-- {stem}"), name
        assert "-- Columns:" in text, name
        views = re.findall(r"CREATE OR REPLACE VIEW (\w+) AS", text)
        macros = re.findall(r"CREATE OR REPLACE MACRO (\w+)\(", text)
        if name.startswith("definitions/"):
            assert macros and not views and "AS TABLE" not in text, name
            header = text.split("CREATE OR REPLACE MACRO")[0]
            for macro in macros:
                assert re.search(rf"COMMENT ON MACRO {macro} IS '(?:[^']|'')+';", text), name
                assert f"--   {macro}(" in header, f"{name}: {macro} undocumented"
            continue
        assert (views, macros) in (([stem], [f"{stem}_between"]), ([], [stem]), ([stem], [])), name
        for view in views:
            assert re.search(rf"COMMENT ON VIEW {view} IS '[^']+';", text), name
        for macro in macros:
            assert re.search(rf"COMMENT ON MACRO TABLE {macro} IS '[^']+';", text), name
            assert f"{macro}(" in text.split(f"CREATE OR REPLACE MACRO {macro}(")[0], f"{name}: {macro} undocumented"
        defined |= {*views, *macros}
    assert {*PUBLIC_VIEWS, *PUBLIC_MACROS} <= defined


@pytest.fixture
def locked(tmp_path: Path, connect_rows: Any, outcomes: Any) -> Any:
    return connect_rows([outcomes.drafted(3, 1)])


def test_lockdown_blocks_writing_files(tmp_path: Path, locked: Any) -> None:
    for target in (tmp_path / "x.csv", Path("/tmp/x.csv")):
        before = target.stat().st_mtime_ns if target.exists() else None
        with pytest.raises(duckdb.PermissionException):
            locked.execute(f"COPY (SELECT 1) TO '{target}'")
        assert (target.stat().st_mtime_ns if target.exists() else None) == before


def test_lockdown_blocks_reading_other_files(tmp_path: Path, locked: Any, outcomes: Any) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a\n1\n")
    elsewhere = outcomes.write_table(tmp_path / "elsewhere", [outcomes.drafted(3, 3)])
    stray = next(elsewhere.glob("dt=*/hour=*/*.parquet"))
    for sql in ("SELECT * FROM read_csv(?)", "SELECT * FROM read_text(?)", "SELECT * FROM read_parquet(?)"):
        for path in (other, stray, Path("/etc/passwd"), tmp_path / "data" / ".." / "other.csv"):
            with pytest.raises(duckdb.PermissionException):
                locked.execute(sql, [str(path)])
    with pytest.raises(duckdb.PermissionException):
        locked.execute(f"SELECT * FROM '{other}'")


def test_lockdown_blocks_attach_extensions_and_settings(tmp_path: Path, locked: Any) -> None:
    with pytest.raises(duckdb.PermissionException):
        locked.execute(f"ATTACH '{tmp_path / 'db.duckdb'}' AS other")
    with pytest.raises(duckdb.Error):
        locked.execute("INSTALL httpfs")
    for setting in ("SET enable_external_access = true", "SET allowed_directories = ['/']",
                    "SET allowed_paths = ['/etc/passwd']", "SET lock_configuration = false",
                    "RESET lock_configuration", "SET python_enable_replacements = true"):
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            locked.execute(setting)
    assert not (tmp_path / "db.duckdb").exists()


def test_a_cursor_is_as_locked_and_in_utc_whatever_the_machines_zone(
        tmp_path: Path, connect_rows: Any, outcomes: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report runs its sections about single requests on a cursor of the connection (a second
    connection of its database): the lockdown and the time zone are the database's, not the first
    connection's alone."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        cursor = connect_rows([outcomes.drafted(3, 1)]).cursor()
        assert cursor.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
        assert cursor.execute("SELECT CAST(TIMESTAMPTZ '2026-12-01 00:30:00+00' AS TIMESTAMP)").fetchall() == [
            (datetime(2026, 12, 1, 0, 30),)]
        with pytest.raises(duckdb.PermissionException):
            cursor.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            cursor.execute("SET enable_external_access = true")
    finally:
        monkeypatch.undo()
        time.tzset()


def test_views_still_work_after_the_lockdown(locked: Any) -> None:
    assert run_query(locked, "SELECT num_drafts, num_accepted_tokens FROM acceptance").to_pylist() == [
        {"num_drafts": 1, "num_accepted_tokens": 1}
    ]
    settings = dict(locked.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', 'lock_configuration')"
    ).fetchall())
    assert settings == {"enable_external_access": "false", "lock_configuration": "true"}


#: What a connection's catalog holds: each view with its query and comment, each macro with its
#: parameters and comment.
CATALOG = """
SELECT view_name AS name, 'view' AS kind, comment, sql AS body FROM duckdb_views() WHERE NOT internal
UNION ALL
SELECT function_name, function_type, comment, array_to_string(parameters, ',')
FROM duckdb_functions() WHERE NOT internal
ORDER BY ALL
"""


@pytest.fixture
def catalog_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CATALOG_CACHE_ENV, str(folder))
    return folder


def drafts(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    try:
        return run_query(con, "SELECT engine_id, num_drafts, num_accepted_tokens FROM acceptance").to_pylist()
    finally:
        con.close()


def test_connections_copy_the_views_from_one_catalog_file_made_once(catalog_cache: Path, tmp_path: Path,
                                                                     outcomes: Any) -> None:
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 2), outcomes.drafted(3, 0)])
    con = connect(root)
    made, schema = sorted(catalog_cache.iterdir())  # nothing else left beside it
    assert re.fullmatch(r"catalog-[0-9a-f]{20}\.duckdb", made.name)
    assert schema.name == made.name.replace(".duckdb", ".rollup-schema")
    copied, created = duckdb.connect(), duckdb.connect()
    load_catalog(copied)
    create_catalog(created)
    assert copied.sql(CATALOG).fetchall() == created.sql(CATALOG).fetchall()
    assert len(copied.sql(CATALOG).fetchall()) > 100
    assert drafts(con) == [{"engine_id": "a/dp0", "num_drafts": 2, "num_accepted_tokens": 2}]
    first = made.stat()
    assert drafts(connect(root)) == [{"engine_id": "a/dp0", "num_drafts": 2, "num_accepted_tokens": 2}]
    again = made.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # read, not made again


def test_a_damaged_catalog_file_is_removed_and_made_again(catalog_cache: Path, tmp_path: Path, outcomes: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 1)])
    connect(root).close()
    made = next(catalog_cache.glob("*.duckdb"))
    made.write_bytes(b"not a DuckDB file" * 1000)
    with caplog.at_level(logging.WARNING, logger="specmetrics.queries.catalog"):
        assert drafts(connect(root)) == [{"engine_id": "a/dp0", "num_drafts": 1, "num_accepted_tokens": 1}]
    assert f"catalog file {made} cannot be read" in caplog.text
    assert not made.exists()
    assert drafts(connect(root)) == [{"engine_id": "a/dp0", "num_drafts": 1, "num_accepted_tokens": 1}]
    assert made.read_bytes()[8:12] == b"DUCK"  # a DuckDB file again


def test_the_rollup_schema_is_kept_beside_the_catalog_file(catalog_cache: Path) -> None:
    bound = duckdb.connect()
    create_catalog(bound)
    expected = bound.sql("FROM file_rollup LIMIT 0").to_arrow_table().schema
    assert rollup_schema.__wrapped__() == expected  # makes the catalog file, and the schema beside it
    kept = next(catalog_cache.glob("*.rollup-schema"))
    assert pa.ipc.read_schema(pa.py_buffer(kept.read_bytes())) == expected
    kept.write_bytes(pa.schema([("only", pa.int8())]).serialize().to_pybytes())
    assert rollup_schema.__wrapped__().names == ["only"]  # read from the file, not bound again
    kept.write_bytes(b"damaged")
    assert rollup_schema.__wrapped__() == expected  # bound again
    kept.unlink()
    assert rollup_schema.__wrapped__() == expected


def test_without_a_cache_folder_each_connection_creates_the_views(tmp_path: Path, outcomes: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("a file where the cache folder would go")
    monkeypatch.setenv(CATALOG_CACHE_ENV, str(tmp_path / "file" / "catalog"))
    assert catalog_file() is None
    root = outcomes.write_table(tmp_path / "data", [outcomes.drafted(3, 3)])
    assert drafts(connect(root)) == [{"engine_id": "a/dp0", "num_drafts": 1, "num_accepted_tokens": 3}]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data", "file"]


def test_another_duckdb_or_another_view_file_gives_another_catalog_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ours = catalog_version.__wrapped__()
    monkeypatch.setattr(duckdb, "__version__", "0.0.1")
    assert catalog_version.__wrapped__() != ours
    monkeypatch.undo()
    package = tmp_path / "queries"
    shutil.copytree(Path(str(resources.files("specmetrics.queries") / "sql")), package / "sql")
    monkeypatch.setattr(catalog_module, "resources", SimpleNamespace(files=lambda name: package))
    assert catalog_version.__wrapped__() == ours
    view = package / "sql" / "metrics" / "acceptance.sql"
    view.write_text(view.read_text() + "\n")
    assert catalog_version.__wrapped__() != ours
