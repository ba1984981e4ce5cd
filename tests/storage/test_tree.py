"""Which files of a tree count when ``specmetrics table convert`` makes it a table (storage.tree):
a foreign file or a copy in the tree is left out of the commit with the reason, so the table's
numbers are those of the ingester's files alone."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.cli import main
from specmetrics.ingest.convert import convert_tree
from specmetrics.schemas.version import SCHEMA_VERSION
from specmetrics.storage.layout import DATA_GLOB, FileName
from specmetrics.storage.tree import tree_files
from tests.support.events import T0
from tests.support.ingest import ingest_tree_once
from tests.support.loadgen import write_load
from tests.support.readers import numbers


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100 steps of 64 outcomes, 25 ms apart, from 1 s before T0's hour on: 4 flushes, one of
    them written in both hour folders (beside it, ``data.table``: the table the tree was laid
    out from, whose numbers are the truth)."""
    root = tmp_path_factory.mktemp("base")
    write_load(root / "log", rows=6_400, seed=3, step_ms=25.0, start_time=T0 - timedelta(seconds=1))
    ingest_tree_once(root / "log", root / "data", flush_rows=1_600)
    return root / "data"


@pytest.fixture
def tree(base: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base, tmp_path / "data"))


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


@pytest.mark.parametrize("plant", [subset_of_columns, unrelated_schema, newer_columns, not_parquet, foreign_name],
                         ids=lambda plant: plant.__name__)
def test_a_foreign_file_is_left_out_of_the_conversion_and_changes_no_number(
        base: Path, tree: Path, plant: Callable[[Path, Path], Path], capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    expected = numbers(base.with_name("data.table"))
    first = data_files(tree)[0]
    foreign = plant(first.parent, first).relative_to(tree)
    assert main(["table", "convert", "--data", str(tree)]) == 0
    assert "1 file(s) readers leave out not committed" in capsys.readouterr().out
    assert f"left out {foreign}: " in caplog.text
    assert numbers(tree) == expected
    assert main(["verify", "--data", str(tree)]) == 0
    assert f"not in the table's log (never read): {foreign}" in capsys.readouterr().out


def test_the_reason_says_what_differs(tree: Path) -> None:
    first = data_files(tree)[0]
    planted = {str(plant(first.parent, first).relative_to(tree)): plant.__name__
               for plant in (subset_of_columns, unrelated_schema, newer_columns, not_parquet, foreign_name)}
    reasons = {file.path: file.reason for file in tree_files(tree)[1]}
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
def test_a_copy_of_a_data_file_is_committed_once(base: Path, tmp_path_factory: pytest.TempPathFactory,
                                                 index: int, where: str) -> None:
    tree = Path(shutil.copytree(base, tmp_path_factory.mktemp("copy") / "data"))
    originals = data_files(tree)
    assert len(originals) == 5  # 4 flushes, one in two hour folders
    source = originals[index]
    target = _copy_target(tree, source, where)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    assert [file.path for file in tree_files(tree)[1]] == [str(target.relative_to(tree))]
    conversion = convert_tree(tree)
    assert (conversion.files, conversion.left_out) == (5, 1)
    assert numbers(tree) == numbers(base.with_name("data.table"))
