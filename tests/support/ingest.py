"""Ingest for tests: one pass over a local log, the rows and files it wrote, and a step message
whose outcomes break a rule."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from specmetrics.ingest import Ingester, IngestSettings, IngestStats
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.schemas.codes import OUTCOME_DTYPE
from specmetrics.schemas.wire import FIELDS, step_event_to_wire
from specmetrics.storage.compaction import Compaction, compact
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, FLUSH_FILES_KEY, ROLLUP_DIR, STATE_DIR, FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import DataFile, ReplaceRefused, Table, TableFile, is_table
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import step_event


def ingest_once(log_dir: Path, data_dir: Path, **settings: Any) -> IngestStats:
    source = LocalLogSource(log_dir, data_dir / STATE_DIR)
    ingester = Ingester(source, data_dir, IngestSettings(**settings))
    try:
        return ingester.run(once=True)
    finally:
        ingester.close()
        source.close()


def ingest_to_s3(log: Path, url: str, state: Path, **settings: object) -> int:
    """One pass over a local log into the table at ``url``; the rows stored."""
    source = LocalLogSource(log, state)
    ingester = Ingester(source, S3Location.parse(url), IngestSettings(**settings))
    try:
        return ingester.run(once=True).rows
    finally:
        ingester.close()
        source.close()


def ingest_tree_once(log_dir: Path, data_dir: Path, **settings: Any) -> IngestStats:
    """A tree of Parquet files at ``data_dir`` as an ingester wrote before tables (what tree
    readers and ``table convert`` take): ``ingest_once`` into a table beside it, laid out without
    the table's log and with the names a tree's files had (no attempt token)."""
    table = data_dir.with_name(f"{data_dir.name}.table")
    stats = ingest_once(log_dir, table, **settings)
    letters = {FileName.parse(path.name) for path in (table / DEAD_LETTER_DIR).glob("*.jsonl")}
    # the row-less file a table commits for a flush of dead letters only (or a lost range): a tree had none
    rowless = {name for path in table.glob(DATA_GLOB)
               if (name := FileName.parse(path.name)) in letters and not pq.read_metadata(path).num_rows}
    for path in sorted(table.rglob("*")):
        relative = path.relative_to(table)
        name = FileName.parse(path.name)
        if path.is_dir() or relative.parts[0] == "_delta_log":
            continue
        if path.suffix == ".parquet" and name in rowless:
            continue
        target = data_dir / relative.parent / without_attempt(path.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".jsonl" and name in rowless:
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            target.write_text("".join(json.dumps({**line, FLUSH_FILES_KEY: 1}) + "\n" for line in lines))
        else:
            shutil.copy2(path, target)
    return stats


def parquet_files(data_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(data_dir)) for p in data_dir.glob(DATA_GLOB))


def rollup_path(data: Path, data_file: Path) -> Path:
    """Where the rollup of ``data_file`` (a data file of the table in ``data``) lives."""
    return data / ROLLUP_DIR / data_file.relative_to(data)


def flush_files(table: Path) -> list[str]:
    """The table's committed data files, by path, each name without its write's attempt token: what
    the names say (the flush's offsets), written again the same."""
    return sorted(str(PurePosixPath(file.relative).with_name(without_attempt(PurePosixPath(file.relative).name)))
                  for file in Table(table).files())


def without_attempt(name: str) -> str:
    """A file name the ingester wrote, without its write's attempt token (another name as it is)."""
    parsed = FileName.parse(name)
    return name if parsed is None else dataclasses.replace(parsed, attempt="").render(name.rsplit(".", 1)[1])


def read_rows(data_dir: Path) -> pa.Table:
    """The rows of the tree's data files, or of those a table's log holds."""
    files = sorted(file.path for file in Table(data_dir).files()) if is_table(data_dir) else \
        sorted(data_dir.glob(DATA_GLOB))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else pa.table({})


def bad_outcomes_message(mutate: str) -> bytes:
    """A step message whose outcomes break a rule: "unknown kind" or "accepted > k_valid"."""
    message = msgpack.unpackb(step_event_to_wire(step_event(event_id=f"bad-{mutate}")))
    packed = np.frombuffer(message[FIELDS.index("outcomes")], dtype=OUTCOME_DTYPE).copy()
    if mutate == "unknown kind":
        packed["kind"][1] = 7
    elif mutate == "accepted > k_valid":
        packed["accepted"][0] = 3
        packed["k_valid"][0] = packed["k_sched"][0] = 2
    message[FIELDS.index("outcomes")] = packed.tobytes()
    packed_message: bytes = msgpack.packb(message)
    return packed_message


def append_bad_record(log_dir: Path) -> None:
    """Append one step message whose outcomes break a rule (a dead letter) to the local log."""
    writer = LocalLogWriter(log_dir)
    writer.append([bad_outcomes_message("unknown kind")])
    writer.close()


def assert_rows_once(data_dir: Path, expected_rows: int) -> None:
    """The tree holds ``expected_rows`` rows, each (event id, request id) once."""
    table = read_rows(data_dir)
    keys = pc.binary_join_element_wise(table["event_id"].cast("string"), table["request_id"], "|")
    assert table.num_rows == expected_rows
    assert pc.count_distinct(keys).as_py() == expected_rows


def rows_once(url: str) -> int:
    """The rows the table holds, checking each (event id, request id) is there once."""
    [(rows, distinct)] = main_query(url, "SELECT count(*), count(DISTINCT (event_id, request_id)) FROM request_steps")
    assert rows == distinct
    return int(rows)


def main_query(url: str, sql: str) -> list[tuple[object, ...]]:
    from specmetrics.queries import connect, run_query

    con = connect(url)
    try:
        return [tuple(row.values()) for row in run_query(con, sql).to_pylist()]
    finally:
        con.close()


def copy_under_another_attempt(path: Path) -> Path:
    """A copy of the local data file ``path`` beside it, named for the same flush with another
    attempt token: a file no commit names yet."""
    name = FileName.parse(path.name)
    assert name is not None
    copy = path.with_name(FileName(name.source, name.partition, name.start, name.end, "0" * 12).render("parquet"))
    shutil.copyfile(path, copy)
    return copy


def optimizes_at_once(data: Path, target_rows: int,
                      monkeypatch: pytest.MonkeyPatch) -> tuple[Compaction, ReplaceRefused]:
    """Two compactions of the table at ``data`` planned on the same version, the first committing just
    before the second would: what the first did, and the second's refusal."""
    first, second = Table(data), Table(data)
    replace = second.replace
    done: list[Compaction] = []

    def after_the_other(removed: list[TableFile], added: list[DataFile]) -> None:
        done.append(compact(first, target_rows=target_rows))
        replace(removed, added)

    monkeypatch.setattr(second, "replace", after_the_other)
    with pytest.raises(ReplaceRefused) as refused:
        compact(second, target_rows=target_rows)
    return done[0], refused.value
