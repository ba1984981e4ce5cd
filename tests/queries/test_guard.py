"""run_query(): one read-only statement, bound parameters, a pyarrow.Table back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from specmetrics.queries import PUBLIC_MACROS, PUBLIC_VIEWS, QueryRejected, describe_views, run_query


@pytest.fixture
def con(connect_rows: Any, outcomes: Any) -> Any:
    return connect_rows([
        outcomes.drafted(3, 2),
        outcomes.drafted(2, 1, engine_instance="b"),
        outcomes.k_zero("no_proposal", engine_instance="b"),
    ])


def views_intact(con: Any) -> None:
    assert [name.split("(")[0] for name, _ in describe_views(con)] == [*PUBLIC_VIEWS, *PUBLIC_MACROS]
    assert run_query(con, "SELECT count(*) AS n FROM request_steps").to_pylist() == [{"n": 3}]
    tables = run_query(con, "SELECT count(*) AS n FROM duckdb_tables() WHERE NOT internal").to_pylist()
    assert tables == [{"n": 0}]


def test_returns_an_arrow_table(con: Any) -> None:
    table = run_query(con, "SELECT engine_id, num_drafts FROM acceptance")
    assert isinstance(table, pa.Table)
    assert table.to_pylist() == [{"engine_id": "a/dp0", "num_drafts": 1}, {"engine_id": "b/dp0", "num_drafts": 1}]


@pytest.mark.parametrize("sql", [
    "SELECT 1",
    "  -- a comment\n  select 1 ;",
    "FROM acceptance",
    "WITH x AS (SELECT 1 AS y) SELECT * FROM x",
    "VALUES (1), (2)",
    "DESCRIBE acceptance",
    "SUMMARIZE request_steps",
    "SHOW TABLES",
    "(SELECT 1) UNION ALL (SELECT 2)",
    "EXPLAIN SELECT * FROM acceptance",
    "EXPLAIN ANALYZE SELECT * FROM acceptance",
    "/* x */ EXPLAIN (FORMAT json) SELECT 1",
])
def test_accepts_read_only_statements(con: Any, sql: str) -> None:
    assert isinstance(run_query(con, sql), pa.Table)


@pytest.mark.parametrize("sql", [
    "INSERT INTO t VALUES (1)",
    "CREATE TABLE t AS SELECT 1",
    "CREATE VIEW acceptance2 AS SELECT 1",
    "CREATE OR REPLACE VIEW acceptance AS SELECT 1",
    "CREATE TEMP MACRO f() AS 1",
    "DROP VIEW acceptance",
    "ALTER VIEW acceptance RENAME TO a2",
    "UPDATE t SET x = 1",
    "DELETE FROM t",
    "COPY (SELECT 1) TO '/tmp/x.csv'",
    "COPY acceptance TO 'out.parquet'",
    "EXPORT DATABASE '/tmp/export'",
    "ATTACH '/tmp/other.duckdb' AS other",
    "DETACH other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET threads = 1",
    "RESET threads",
    "PRAGMA table_info('acceptance')",
    "CALL pragma_version()",
    "CHECKPOINT",
    "PREPARE p AS SELECT 1",
    "BEGIN TRANSACTION",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    "EXPLAIN (ANALYZE) CREATE TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/x.csv'",
    "EXPLAIN DROP VIEW acceptance",
    "PIVOT request_steps ON kind",  # without an IN list DuckDB runs it as several statements
])
def test_rejects_anything_else(con: Any, sql: str) -> None:
    with pytest.raises(ValueError, match=r"not allowed|only allowed|single read-only statement"):
        run_query(con, sql)
    views_intact(con)


@pytest.mark.parametrize("sql", [
    "SELECT 1; SELECT 2",
    "SELECT 1; DROP VIEW acceptance",
    "SELECT * FROM acceptance; CREATE TABLE t AS SELECT 1",
    "SELECT 'a;b'; DROP VIEW acceptance --",
])
def test_rejects_several_statements(con: Any, sql: str) -> None:
    with pytest.raises(QueryRejected, match="got 2 statements"):
        run_query(con, sql)
    views_intact(con)


@pytest.mark.parametrize("sql", ["", "   ", "-- nothing\n", ";"])
def test_rejects_empty_queries(con: Any, sql: str) -> None:
    with pytest.raises(QueryRejected, match="empty query"):
        run_query(con, sql)


def test_copy_is_rejected_before_it_runs(con: Any, tmp_path: Path) -> None:
    target = tmp_path / "data" / "inside.csv"  # inside the data dir: DuckDB's lock-down alone would allow it
    with pytest.raises(QueryRejected):
        run_query(con, f"COPY (SELECT 1) TO '{target}'")
    assert not target.exists()


def test_parameters_are_bound_not_pasted(con: Any) -> None:
    table = run_query(con, "SELECT * FROM acceptance WHERE engine_id = ?", ["x'; DROP VIEW acceptance; --"])
    assert table.num_rows == 0
    assert table.column_names[:4] == ["engine_id", "model", "method", "num_spec_tokens"]
    views_intact(con)
    assert run_query(con, "SELECT num_drafts FROM acceptance WHERE engine_id = ?", ["b/dp0"]).to_pylist() == [
        {"num_drafts": 1}
    ]


def test_positional_and_named_parameters(con: Any) -> None:
    assert run_query(con, "SELECT $1::INTEGER + $2::INTEGER AS s", (1, 2)).to_pylist() == [{"s": 3}]
    got = run_query(con, "SELECT count(*) AS n FROM request_steps WHERE engine_id = $engine AND kind = $kind",
                    {"engine": "b/dp0", "kind": "k_zero"})
    assert got.to_pylist() == [{"n": 1}]


def test_a_string_is_not_a_parameter_list(con: Any) -> None:
    with pytest.raises(TypeError, match="not a string"):
        run_query(con, "SELECT ?", "abc")
