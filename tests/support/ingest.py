"""Ingest for tests: one pass over a local log, the rows and files it wrote, and a step message
whose outcomes break a rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from specmetrics.ingest import Ingester, IngestSettings, IngestStats
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.schemas.codes import OUTCOME_DTYPE
from specmetrics.schemas.wire import FIELDS, step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB, STATE_DIR
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import Table, is_table
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
    ingester = Ingester(source, S3Location.parse(url), IngestSettings(**settings), state_dir=state)
    try:
        return ingester.run(once=True).rows
    finally:
        ingester.close()
        source.close()


def ingest_tree_once(log_dir: Path, data_dir: Path, **settings: Any) -> IngestStats:
    """``ingest_once`` into a new output written as a tree of Parquet files (no table's log)."""
    return ingest_once(log_dir, data_dir, table=False, **settings)


def parquet_files(data_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(data_dir)) for p in data_dir.glob(DATA_GLOB))


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
