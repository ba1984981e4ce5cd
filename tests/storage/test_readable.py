"""Readers take only the data files a table's log names (storage.readable), and a rollup only with
its committed data file and a rollup's schema; a folder of Parquet files without a log (a tree
written before tables) is refused, naming ``specmetrics table convert``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.queries.catalog import rollup_schema
from specmetrics.queries.verify import verify_table
from specmetrics.schemas.version import SCHEMA_VERSION
from specmetrics.storage.layout import ROLLUP_DIR
from specmetrics.storage.readable import NotATable, select_files
from specmetrics.storage.table import Table
from tests.support.events import T0
from tests.support.ingest import ingest_once, ingest_tree_once, rollup_path
from tests.support.loadgen import write_load

COUNTS = "SELECT count(*) AS rows, sum(accepted) AS accepted, count(DISTINCT event_id) AS events FROM request_steps"
ACCEPTANCE = "SELECT engine_id, num_drafts, num_accepted_tokens FROM acceptance ORDER BY engine_id"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100 steps of 64 outcomes, 25 ms apart, from 1 s before T0's hour on: 4 flushes, one of
    them written in both hour folders."""
    root = tmp_path_factory.mktemp("base")
    write_load(root / "log", rows=6_400, seed=3, step_ms=25.0, start_time=T0 - timedelta(seconds=1))
    ingest_once(root / "log", root / "data", flush_rows=1_600)
    return root / "data"


@pytest.fixture
def table(base: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base, tmp_path / "data"))


def numbers(data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    con = connect(data)
    try:
        return run_query(con, COUNTS).to_pylist(), run_query(con, ACCEPTANCE).to_pylist()
    finally:
        con.close()


def report_steps(data: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> int:
    assert main(["report", "--data", str(data), "--out", str(out), "--format", "md", *extra]) == 0
    found = re.search(r"\(([\d,]+) request-steps\)", capsys.readouterr().out)
    assert found, "no request-step count in the report's line"
    return int(found[1].replace(",", ""))


def data_files(data: Path) -> list[Path]:
    return sorted(file.path for file in Table(data).files())


def test_a_copy_and_its_rollup_are_not_read_and_a_misshapen_rollup_is_rewritten(
        table: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = table
    steps = numbers(tree)[0][0]["rows"]
    assert main(["rollup", "--data", str(tree)]) == 0
    source = data_files(tree)[0]
    copy = source.with_name(source.name.replace("log-", "copy-"))
    shutil.copy(source, copy)
    shutil.copy(rollup_path(tree, source), rollup_path(tree, copy))  # its rollup copied too
    assert report_steps(tree, tmp_path / "r", capsys) == steps
    shutil.copy(source, rollup_path(tree, source))  # a data file where a rollup belongs
    report = verify_table(tree)
    assert report.uncommitted == [str(copy.relative_to(tree))]
    left_out = {file.path: file.reason for file in report.left_out}
    assert f"{ROLLUP_DIR}/{copy.relative_to(tree)}" not in left_out  # passed over, as its data file
    assert left_out[f"{ROLLUP_DIR}/{source.relative_to(tree)}"].startswith("not a rollup's schema: missing minute")
    assert report_steps(tree, tmp_path / "r", capsys) == steps
    assert pq.read_schema(rollup_path(tree, source)) == rollup_schema()  # written again
    rollup = pq.read_table(rollup_path(tree, source))
    pq.write_table(rollup.append_column("later_sum", pa.array([0] * rollup.num_rows)), rollup_path(tree, source))
    left_out = {file.path: file.reason for file in verify_table(tree).left_out}
    assert left_out[f"{ROLLUP_DIR}/{source.relative_to(tree)}"] == (
        f"not a rollup's schema: written by a newer specmetrics (columns this one, schema {SCHEMA_VERSION}, does "
        "not know: later_sum): upgrade specmetrics to read it")
    assert report_steps(tree, tmp_path / "r", capsys) == steps


def test_a_tree_is_refused_by_every_reader_naming_the_conversion(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, tree = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=640, seed=4)
    ingest_tree_once(log, tree)
    refusal = f"{tree} holds a tree of Parquet files, not a Delta table (the layout before tables): 'specmetrics " \
              f"table convert --data {tree}' makes it a table in place"
    with pytest.raises(NotATable) as raised:
        select_files(tree)
    assert str(raised.value) == refusal
    for command in (["verify", "--data", str(tree)], ["rollup", "--data", str(tree)],
                    ["report", "--data", str(tree), "--out", str(tmp_path / "r")],
                    ["db", "export", str(tmp_path / "x.duckdb"), "--data", str(tree)]):
        assert main(command) == 2, command
        assert refusal in capsys.readouterr().err, command
    done = subprocess.run([sys.executable, "-m", "specmetrics.cli", "sql", "--data", str(tree), "SELECT 1"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and refusal in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert main(["table", "convert", "--data", str(tree)]) == 0
    capsys.readouterr()
    assert main(["verify", "--data", str(tree)]) == 0


def test_a_folder_without_data_reads_as_empty_and_export_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "parquet"
    folder.mkdir()
    pq.write_table(pa.table({"x": [1]}), folder / "loose.parquet")
    assert select_files(folder).data == ()
    assert main(["db", "export", str(tmp_path / "x.duckdb"), "--data", str(folder)]) == 2
    assert "no data files of the ingester under" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()
