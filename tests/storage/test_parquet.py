"""The table's data files (storage.parquet): every column dictionary-encoded; Delta readers other
than ours (delta-rs, Polars) read the rows ours do."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from specmetrics.queries import connect, run_query
from specmetrics.storage.table import Table
from tests.support.ingest import ingest_once
from tests.support.loadgen import write_load


def test_every_column_has_a_dictionary(log_dir: Path, data_dir: Path) -> None:
    """Spark's vectorized reader refuses BYTE_STREAM_SPLIT, which would pack seq_len tighter."""
    write_load(log_dir, rows=20_000, engines=2, seed=3)
    ingest_once(log_dir, data_dir)
    [file] = Table(data_dir).files()
    metadata = pq.read_metadata(file.location)
    encodings = {metadata.row_group(0).column(i).path_in_schema: set(metadata.row_group(0).column(i).encodings)
                 for i in range(metadata.num_columns)}
    assert "seq_len" in encodings and "vllm_accepted_per_pos.list.element" in encodings
    undictionaried = [path for path, used in encodings.items() if "RLE_DICTIONARY" not in used]
    assert undictionaried == [], undictionaried


def test_delta_rs_and_polars_read_the_rows_duckdb_reads(log_dir: Path, data_dir: Path) -> None:
    write_load(log_dir, rows=30_000, engines=2, seed=4, drafter_max_len=700)
    ingest_once(log_dir, data_dir, flush_rows=10_000)
    columns = ["event_id", "request_id", "kind", "seq_len", "vllm_accepted_per_pos"]
    con = connect(data_dir)
    try:
        ours = run_query(con, f"SELECT {', '.join(columns)} FROM raw_request_steps ORDER BY event_id, request_id")
    finally:
        con.close()
    assert ours.num_rows >= 30_000 and pc.count(ours["seq_len"]).as_py() == ours.num_rows
    delta = DeltaTable(str(data_dir)).to_pyarrow_table(columns=columns)
    delta = delta.sort_by([("event_id", "ascending"), ("request_id", "ascending")])
    assert delta["seq_len"].to_pylist() == ours["seq_len"].to_pylist()
    assert delta["vllm_accepted_per_pos"].to_pylist() == ours["vllm_accepted_per_pos"].to_pylist()
    frame = pl.read_delta(str(data_dir), columns=columns).sort(["event_id", "request_id"])
    assert frame["seq_len"].to_list() == ours["seq_len"].to_pylist()
    assert frame["kind"].cast(pl.String).to_list() == ours["kind"].to_pylist()
