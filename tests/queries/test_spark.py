"""The views on real Spark (local mode), transpiled from the same SQL files (queries.spark), give
DuckDB's numbers over the same committed files."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.queries.spark import SPARK_VIEWS, create_spark_views, spark_statements
from tests.support.ingest import append_bad_record, ingest_once
from tests.support.loadgen import write_load


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = (SparkSession.builder.master("local[2]").appName("specmetrics-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    yield session
    session.stop()


def rows(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in one form for both engines: dates and times as text, floats rounded to 12 digits."""
    def plain(value: Any) -> Any:
        if isinstance(value, float):
            return None if math.isnan(value) else round(value, 12)
        if isinstance(value, (date, datetime)):
            return value.isoformat()
        return value

    return [{key: plain(value) for key, value in row.items()} for row in values]


def test_spark_computes_duckdbs_numbers_from_the_same_definitions(spark: SparkSession, tmp_path: Path) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=20_000, seed=31, engines=2, num_spec_tokens=4, grammar_invalid_rate=0.1, k_zero_rate=0.1,
               drafter_max_len=600)
    write_load(log, rows=6_400, seed=32, engine_prefix="k2", num_spec_tokens=2)
    append_bad_record(log)
    ingest_once(log, data, flush_rows=5_000)
    # seq_len: the column no view here reads, and the one an encoding other than a dictionary would pack
    # tighter (Spark 4.0 cannot read BYTE_STREAM_SPLIT: storage.parquet).
    lengths = "SELECT count(seq_len) AS n, sum(seq_len) AS total, max(seq_len) AS longest FROM raw_request_steps"
    con = connect(data)
    try:
        expected = {view: rows(run_query(con, f"SELECT * FROM {view}").to_pylist()) for view in SPARK_VIEWS}
        duckdb_lengths = run_query(con, lengths).to_pylist()
    finally:
        con.close()
    create_spark_views(spark, data)
    for view in SPARK_VIEWS:
        got = rows([row.asDict() for row in spark.sql(f"SELECT * FROM {view}").collect()])
        assert got == expected[view], view
    assert [row.asDict() for row in spark.sql(lengths).collect()] == duckdb_lengths
    assert duckdb_lengths[0]["n"] > 20_000
    kinds = {row["kind"] for row in expected["outcome_shares"]}
    assert {"drafted", "skipped_for_length", "grammar_invalid", "k_zero"} <= kinds  # every branch of the formulas
    assert {row["num_spec_tokens"] for row in expected["acceptance_per_position"]} == {2, 4}


def test_db_export_writes_the_spark_statements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "views.sql"
    assert main(["db", "export", str(target), "--dialect", "spark"]) == 0
    text = target.read_text()
    assert text.count("CREATE OR REPLACE TEMPORARY VIEW") == len(spark_statements())
    for view in (*SPARK_VIEWS, "request_steps"):
        assert f"CREATE OR REPLACE TEMPORARY VIEW {view} AS" in text
    assert "raw_request_steps" in text and "MACRO" not in text
