"""Readers take only the ingester's files (storage.readable): a foreign file or a copy in the tree
changes no number, is named with the reason, and makes ``verify`` fail."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.queries.rollup import rollup_path
from specmetrics.queries.verify import verify_tree
from specmetrics.schemas.version import SCHEMA_VERSION
from specmetrics.storage.layout import DATA_GLOB, ROLLUP_DIR, FileName
from specmetrics.storage.readable import select_files
from tests.support.events import T0
from tests.support.ingest import ingest_tree_once
from tests.support.loadgen import write_load

COUNTS = "SELECT count(*) AS rows, sum(accepted) AS accepted, count(DISTINCT event_id) AS events FROM request_steps"
ACCEPTANCE = "SELECT engine_id, num_drafts, num_accepted_tokens FROM acceptance ORDER BY engine_id"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100 steps of 64 outcomes, 25 ms apart, from 1 s before T0's hour on: 4 flushes, one of
    them written in both hour folders."""
    root = tmp_path_factory.mktemp("base")
    write_load(root / "log", rows=6_400, seed=3, step_ms=25.0, start_time=T0 - timedelta(seconds=1))
    ingest_tree_once(root / "log", root / "data", flush_rows=1_600)
    return root / "data"


@pytest.fixture
def tree(base: Path, tmp_path: Path) -> Path:
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
    return sorted(data.glob(DATA_GLOB))


def subset_of_columns(folder: Path, source: Path) -> Path:
    """The operator's file: some columns of real rows, all accepted, under an ingester-like name."""
    table = pq.read_table(source).drop_columns(["drafts_verified", "emitted", "engine_instance"])
    table = table.set_column(table.schema.get_field_index("accepted"), "accepted",
                             pa.array([3] * len(table), pa.int16()))
    path = folder / "foreign-0-00000000000000000000-00000000000000000099.parquet"
    pq.write_table(table, path)
    return path


def unrelated_schema(folder: Path, source: Path) -> Path:
    path = folder / "export-0-00000000000000000000-00000000000000000001.parquet"
    pq.write_table(pa.table({"accepted": ["many", "few"], "x": [1.5, 2.5]}), path)
    return path


def newer_columns(folder: Path, source: Path) -> Path:
    """A file a later minor version would write: every stored column, then one this version does not know."""
    table = pq.read_table(source)
    path = folder / "newer-0-00000000000000000000-00000000000000000099.parquet"
    pq.write_table(table.append_column("vllm_later", pa.array([1] * len(table), pa.int32())), path)
    return path


def not_parquet(folder: Path, source: Path) -> Path:
    path = folder / "log-7-00000000000000000000-00000000000000000001.parquet"
    path.write_bytes(b"PAR1 not really")
    return path


def foreign_name(folder: Path, source: Path) -> Path:
    """Real rows under a name the ingester never writes."""
    path = folder / "part-0001.parquet"
    shutil.copy(source, path)
    return path


@pytest.mark.parametrize("plant", [subset_of_columns, unrelated_schema, not_parquet, foreign_name],
                         ids=lambda plant: plant.__name__)
def test_a_foreign_file_changes_no_reader_and_fails_verify(
        tree: Path, tmp_path: Path, plant: Callable[[Path, Path], Path], capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    expected = numbers(tree)
    steps = expected[0][0]["rows"]
    first = data_files(tree)[0]
    foreign = plant(first.parent, first).relative_to(tree)
    assert numbers(tree) == expected
    assert f"left out {foreign}: " in caplog.text
    caplog.clear()
    assert report_steps(tree, tmp_path / "raw", capsys, "--raw") == steps
    assert f"left out {foreign}: " in caplog.text
    assert report_steps(tree, tmp_path / "rollups", capsys) == steps  # builds and reads the rollups
    assert not rollup_path(tree, tree / foreign).exists()
    assert report_steps(tree, tmp_path / "rollups", capsys) == steps
    assert main(["verify", "--data", str(tree)]) == 1
    out = capsys.readouterr().out
    assert f"left out by readers: {foreign}: " in out and out.rstrip().endswith("NOT clean")
    assert main(["rollup", "--data", str(tree)]) == 0
    assert not rollup_path(tree, tree / foreign).exists()


def test_the_reason_says_what_differs(tree: Path) -> None:
    first = data_files(tree)[0]
    planted = {str(plant(first.parent, first).relative_to(tree)): plant.__name__
               for plant in (subset_of_columns, unrelated_schema, newer_columns, not_parquet, foreign_name)}
    reasons = {file.path: file.reason for file in select_files(tree).left_out}
    assert set(reasons) == set(planted)
    by_plant = {plant: reasons[path] for path, plant in planted.items()}
    assert by_plant["subset_of_columns"] == ("not the stored table's schema: missing engine_instance, "
                                             "drafts_verified, emitted; accepted is int16, not int16 not null")
    assert by_plant["unrelated_schema"].startswith("not the stored table's schema: missing schema_version")
    assert "accepted is string, not int16 not null" in by_plant["unrelated_schema"]
    assert by_plant["newer_columns"] == (f"not the stored table's schema: written by a newer specmetrics (columns "
                                         f"this one, schema {SCHEMA_VERSION}, does not know: vllm_later): upgrade "
                                         "specmetrics to read it")
    assert by_plant["not_parquet"].startswith("not a readable Parquet file")
    assert by_plant["foreign_name"].startswith("not a name the ingester writes")


def _copy_target(tree: Path, source: Path, where: str) -> Path:
    name = FileName.parse(source.name)
    assert name is not None
    if where == "other hour":
        hour = int(source.parent.name.removeprefix("hour="))
        return source.parent.with_name(f"hour={(hour + 2) % 24:02d}") / source.name  # no file of that name there
    if where == "other day":
        return tree / "dt=2026-12-24" / source.parent.name / source.name
    if where == "other source":
        return source.with_name(FileName("copy", name.partition, name.start, name.end).render("parquet"))
    if where == "wider offsets":  # still holds the rows' offsets, overlapping the original flush
        return source.with_name(FileName(name.source, name.partition, name.start, name.end + 1000).render("parquet"))
    assert where == "shifted offsets"
    return source.with_name(FileName(name.source, name.partition, name.end + 1, name.end + 40).render("parquet"))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(0, 4), where=st.sampled_from(
    ["other hour", "other day", "other source", "wider offsets", "shifted offsets"]))
def test_a_copy_of_a_data_file_is_not_counted_twice(base: Path, tmp_path_factory: pytest.TempPathFactory,
                                                    index: int, where: str) -> None:
    tree = Path(shutil.copytree(base, tmp_path_factory.mktemp("copy") / "data"))
    expected = numbers(tree)
    originals = data_files(tree)
    assert len(originals) == 5  # 4 flushes, one in two hour folders
    source = originals[index]
    target = _copy_target(tree, source, where)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    assert numbers(tree) == expected
    report = verify_tree(tree)
    assert [file.path for file in report.left_out] == [str(target.relative_to(tree))]
    assert not report.clean and report.duplicate_events == 0


def test_a_copy_is_left_out_of_the_rollups_and_a_misshapen_rollup_rewritten(
        tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = numbers(tree)[0][0]["rows"]
    assert main(["rollup", "--data", str(tree)]) == 0
    source = data_files(tree)[0]
    copy = source.with_name(source.name.replace("log-", "copy-"))
    shutil.copy(source, copy)
    shutil.copy(rollup_path(tree, source), rollup_path(tree, copy))  # its rollup copied too
    assert report_steps(tree, tmp_path / "r", capsys) == steps
    shutil.copy(source, rollup_path(tree, source))  # a data file where a rollup belongs
    left_out = {file.path: file.reason for file in verify_tree(tree).left_out}
    assert left_out[f"{ROLLUP_DIR}/{copy.relative_to(tree)}"] == "its data file is left out"
    assert left_out[f"{ROLLUP_DIR}/{source.relative_to(tree)}"].startswith("not a rollup's schema: missing minute")
    assert report_steps(tree, tmp_path / "r", capsys) == steps
    assert pq.read_schema(rollup_path(tree, source)).names[-1] == "last_event"  # written again
    rollup = pq.read_table(rollup_path(tree, source))
    pq.write_table(rollup.append_column("later_sum", pa.array([0] * rollup.num_rows)), rollup_path(tree, source))
    left_out = {file.path: file.reason for file in verify_tree(tree).left_out}
    assert left_out[f"{ROLLUP_DIR}/{source.relative_to(tree)}"] == (
        f"not a rollup's schema: written by a newer specmetrics (columns this one, schema {SCHEMA_VERSION}, does "
        "not know: later_sum): upgrade specmetrics to read it")
    assert report_steps(tree, tmp_path / "r", capsys) == steps


def test_the_command_line_warns_and_keeps_its_numbers(tree: Path, tmp_path: Path) -> None:
    """``specmetrics sql`` as a process: the same answer with the foreign file, which stderr names."""
    query = "SELECT round(100 * acceptance_rate, 2) AS pct FROM acceptance_diff ORDER BY engine_id"

    def sql() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "specmetrics.cli", "sql", "--data", str(tree), "--format",
                               "csv", query], check=False, capture_output=True, text=True, timeout=60)

    clean = sql()
    assert clean.returncode == 0 and clean.stderr == ""
    first = data_files(tree)[0]
    foreign = subset_of_columns(first.parent, first).relative_to(tree)
    tampered = sql()
    assert (tampered.returncode, tampered.stdout) == (0, clean.stdout)
    assert f"left out {foreign}: not the stored table's schema" in tampered.stderr


def test_export_refuses_a_folder_that_is_not_a_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "parquet" / "dt=2026-11-30" / "hour=12"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), folder / "log-0-00000000000000000000-00000000000000000000.parquet")
    pq.write_table(pa.table({"x": [1]}), tmp_path / "parquet" / "loose.parquet")
    assert main(["db", "export", str(tmp_path / "x.duckdb"), "--data", str(tmp_path / "parquet")]) == 2
    assert "no data files of the ingester under" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()
