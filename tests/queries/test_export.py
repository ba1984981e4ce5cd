"""``db export``: a DuckDB file any DuckDB client opens, with the same views as ``connect``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.queries.catalog import s3_filesystem
from specmetrics.storage.location import S3Location
from tests.support.ingest import ingest_to_s3
from tests.support.loadgen import write_load

#: Run in a plain Python with only duckdb: no specmetrics code is involved in reading the file.
CLIENT = """
import duckdb, json, sys
con = duckdb.connect(sys.argv[1], read_only=True)
print(json.dumps({
    "acceptance": con.sql("SELECT engine_id, num_drafts, num_accepted_tokens FROM acceptance").fetchall(),
    "window": con.sql("SELECT sum(num_drafts) FROM acceptance_vllm_between(?, ?)",
                      params=["2025-01-01 10:00:00", "2025-01-01 11:00:00"]).fetchall(),
    "timeline": con.sql("SELECT count(*) FROM acceptance_timeline(bucket := INTERVAL 1 HOUR)").fetchall(),
}))
"""


def client(db: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-I", "-c", CLIENT, str(db)], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_exported_file_has_the_views_over_the_tree(tmp_path: Path, connect_rows: Any, outcomes: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    con = connect_rows([outcomes.drafted(3, 2), outcomes.skipped(3), outcomes.k_zero("no_proposal")])
    data, db = tmp_path / "data", tmp_path / "specmetrics.duckdb"
    assert main(["db", "export", str(db), "--data", str(data)]) == 0
    assert "open it read-only" in capsys.readouterr().out
    seen = client(db)
    expected = run_query(con, "SELECT engine_id, num_drafts, num_accepted_tokens FROM acceptance").to_pylist()
    assert seen["acceptance"] == [list(r.values()) for r in expected] == [["a/dp0", 1, 2]]
    assert seen["window"] == [[2]]  # the draft and the placeholder draft, as vLLM counts
    assert seen["timeline"] == [[1]]
    # files the ingester adds later are seen once exported again
    outcomes.write_table(data, [outcomes.drafted(3, 3)])
    assert client(db)["acceptance"] == [["a/dp0", 1, 2]]
    assert main(["db", "export", str(db), "--data", str(data), "--force"]) == 0
    assert client(db)["acceptance"] == [["a/dp0", 2, 5]]


def test_a_path_with_a_quote_is_exported_and_one_with_glob_characters_refused(
        tmp_path: Path, outcomes: Any, capsys: pytest.CaptureFixture[str]) -> None:
    quoted = outcomes.write_table(tmp_path / "it's data", [outcomes.drafted(3, 2)])
    assert main(["db", "export", str(tmp_path / "q.duckdb"), "--data", str(quoted)]) == 0
    assert client(tmp_path / "q.duckdb")["acceptance"] == [["a/dp0", 1, 2]]
    globbed = outcomes.write_table(tmp_path / "data[1]", [outcomes.drafted(3, 2)])
    assert main(["db", "export", str(tmp_path / "g.duckdb"), "--data", str(globbed)]) == 2
    assert "glob characters" in capsys.readouterr().err
    assert not (tmp_path / "g.duckdb").exists()


def test_export_refuses_to_overwrite_and_to_export_nothing(tmp_path: Path, connect_rows: Any, outcomes: Any,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    connect_rows([outcomes.drafted(3, 2)])
    db = tmp_path / "x.duckdb"
    db.write_text("precious")
    assert main(["db", "export", str(db), "--data", str(tmp_path / "data")]) == 2
    assert "exists: pass --force" in capsys.readouterr().err
    assert db.read_text() == "precious"
    assert main(["db", "export", str(db), "--data", str(tmp_path / "data"), "--force"]) == 0
    (tmp_path / "empty").mkdir()
    assert main(["db", "export", str(tmp_path / "y.duckdb"), "--data", str(tmp_path / "empty")]) == 2
    assert "no data files of the ingester under" in capsys.readouterr().err
    assert not (tmp_path / "y.duckdb").exists()


def test_a_table_on_s3_is_exported_with_its_objects_and_read_where_s3_is_reachable(
        s3_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_load(tmp_path / "log", rows=64 * 30, seed=32, engines=2)
    ingest_to_s3(tmp_path / "log", s3_url, tmp_path / "state", flush_rows=64 * 10)
    db = tmp_path / "s3.duckdb"
    assert main(["db", "export", str(db), "--data", s3_url]) == 0
    assert "on a connection that reads s3://" in capsys.readouterr().out
    query = "SELECT engine_id, num_drafts, num_accepted_tokens FROM acceptance ORDER BY engine_id"
    con = connect(s3_url)
    try:
        expected = run_query(con, query).to_pylist()
        # its objects' columns read once, in one scan per group, not by name at each query's bind
        [(source,)] = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'raw_request_steps'").fetchall()
        assert "union_by_name := false" in source and "union_by_name := true" not in source
    finally:
        con.close()
    exported = duckdb.connect(str(db), read_only=True)
    try:
        with pytest.raises(duckdb.Error, match="httpfs"):  # no file system for s3:// on this connection
            exported.sql(query).fetchall()
        exported.register_filesystem(s3_filesystem(S3Location.parse(s3_url)))
        assert exported.sql(query).to_arrow_table().to_pylist() == expected
    finally:
        exported.close()
    assert len(expected) == 2 and all(row["num_drafts"] > 0 for row in expected)
    assert main(["db", "export", str(db), "--data", s3_url.rsplit("/", 1)[0] + "/nothing", "--force"]) == 2
    assert "holds no table" in capsys.readouterr().err
