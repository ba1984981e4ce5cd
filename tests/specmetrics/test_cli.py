"""The ``specmetrics`` command line, run in-process with real files."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from specmetrics.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_schema_prints_the_json_schema_and_the_arrow_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema", "--format", "json")
    schema = json.loads(out)
    assert code == 0 and schema["title"] == "StepEvent"
    assert {"event_id", "engine_instance", "num_spec_tokens", "outcomes"} <= set(schema["properties"])
    code, out, _ = run(capsys, "schema", "--format", "arrow")
    assert code == 0 and "k_zero_reason: dictionary<values=string" in out


def test_loadgen_ingest_and_sql_agree_with_the_ground_truth(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    code, out, err = run(capsys, "loadgen", "--sink", log.as_uri(), "--rows", "20000", "--seed", "4",
                         "--start-time", "2026-11-30T12:00:00+00:00", "--truth", "-", "--scheduling", "sync")
    assert code == 0 and "loadgen: 20,032/20,000 rows" in err
    truth = json.loads(out)["loadgen-0/dp0"]
    code, out, _ = run(capsys, "ingest", "--source", log.as_uri(), "--out", str(data), "--once")
    assert code == 0 and out.startswith("ingested 20,032 request-steps from 313 records")
    code, out, _ = run(capsys, "sql", "--data", str(data), "--format", "json",
                       "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance")
    assert code == 0
    assert json.loads(out) == [{name: truth[name] for name in
                                ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}]
    code, out, _ = run(capsys, "sql", "--data", str(data), "--format", "csv",
                       "SELECT k_zero_reason, request_steps FROM outcome_shares WHERE kind = ? ORDER BY 1",
                       "--param", "k_zero")
    assert code == 0
    assert {r["k_zero_reason"]: int(r["request_steps"]) for r in csv.DictReader(io.StringIO(out))} == \
        truth["k_zero_reasons"]
    assert "grammar_truncated" in truth["k_zero_reasons"]
    code, out, _ = run(capsys, "sql", "--data", str(data), "SELECT engine_id, num_drafts FROM acceptance")
    assert out.splitlines()[0].split() == ["engine_id", "num_drafts"]
    assert out.splitlines()[2].split() == ["loadgen-0/dp0", str(truth["num_drafts"])]
    assert out.splitlines()[-1] == "(1 row)"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("DROP VIEW acceptance", "statements are not allowed"),
        ("SELECT 1; SELECT 2", "got 2 statements"),
        ("COPY (SELECT 1) TO '/tmp/specmetrics-escape.csv'", "statements are not allowed"),
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("SELEC nonsense", "syntax error"),
    ],
)
def test_sql_refuses_anything_but_one_read_only_query(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, query: str, message: str
) -> None:
    (tmp_path / "data").mkdir()
    code, out, err = run(capsys, "sql", "--data", str(tmp_path / "data"), query)
    assert code == 2 and out == ""
    assert err.startswith("specmetrics sql: error:") and message in err
    assert not Path("/tmp/specmetrics-escape.csv").exists()


@pytest.mark.parametrize("command", [
    ["sql", "SELECT 1"], ["verify"], ["rollup"], ["report", "--out", "{tmp}/r"], ["db", "export", "{tmp}/x.duckdb"],
    ["table", "optimize"], ["table", "vacuum"], ["table", "checkpoint"], ["table", "maintain"],
])
def test_a_missing_data_directory_is_named_alike_by_every_reader(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]) -> None:
    """Not 'is not a table' (table: as if a tree were there to convert), nor a path pattern of the
    folders before tables: the folder named, and where it comes from."""
    missing = tmp_path / "nope"
    args = [*(arg.format(tmp=tmp_path) for arg in command), "--data", str(missing)]
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert f"error: data directory '{missing}' does not exist: point at an ingester's output" in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "x.duckdb").exists()
    (tmp_path / "file").write_text("")
    code, _, err = run(capsys, *[arg.replace(str(missing), str(tmp_path / "file")) for arg in args])
    assert code == 2 and f"data directory '{tmp_path / 'file'}' is not a directory" in err


def test_bad_loadgen_options_are_clear_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "loadgen", "--sink", (tmp_path / "l").as_uri(), "--prompt-len", "10")
    assert code == 2 and "expected MIN,MAX, got '10'" in err
    code, _, err = run(capsys, "loadgen", "--sink", "mqtt://localhost:1883/t")
    assert code == 2 and "unsupported sink URL scheme 'mqtt'" in err
    for url in ("kafkas://alice:s3cret@broker:9093/t", "file://alice:s3cret@host/log"):
        code, _, err = run(capsys, "loadgen", "--sink", url)
        assert code == 2 and "s3cret" not in err
        code, _, err = run(capsys, "ingest", "--source", url, "--out", str(tmp_path / "d"), "--once")
        assert code == 2 and "s3cret" not in err and "URL" in err
    code, _, err = run(capsys, "loadgen", "--sink", "kafka://user:secret@localhost:9092/t")
    assert code == 2 and "must not carry credentials" in err and "secret" not in err


@pytest.mark.parametrize("command", [("ingest",), ("verify",), ("sql",), ("report",), ("rollup",), ("db", "export")])
def test_every_command_calls_what_ingest_writes_a_table(capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
                                                        ) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Parquet tree" not in help_text and "Delta Lake table" in help_text
