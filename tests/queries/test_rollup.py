"""A data file's rollup: request-steps per minute, context bucket and outcome shape, equal to
a count of the file's rows in Python; the ingester leaves them to reports."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from specmetrics.queries.rollup import build_missing, check_rollups, rollup_path
from specmetrics.storage.layout import ROLLUP_DIR
from tests.support.ingest import ingest_once, parquet_files
from tests.support.loadgen import write_load

KEY = ("engine_id", "model", "method", "num_spec_tokens", "minute", "context_start", "kind", "k_zero_reason",
       "k_sched", "k_valid", "k_invalid", "accepted")


def counted(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[int, datetime, datetime]]:
    """The rollup of ``rows``, computed in Python."""
    groups: dict[tuple[Any, ...], list[datetime]] = {}
    for row in rows:
        t: datetime = row["event_time"]
        context = row["batch_max_seq_len"]
        key = (row["engine_id"], row["model"], row["method"], row["num_spec_tokens"],
               t.replace(second=0, microsecond=0), None if context is None else context // 256 * 256, row["kind"],
               row["k_zero_reason"], row["k_sched"], row["k_valid"], row["k_invalid"], row["accepted"])
        groups.setdefault(key, []).append(t)
    return {key: (len(times), min(times), max(times)) for key, times in groups.items()}


def test_every_data_file_gets_a_rollup_equal_to_a_count_of_its_rows(log_dir: Path, data_dir: Path) -> None:
    write_load(log_dir, rows=20_000, seed=3, engines=2, drafter_max_len=1500)  # some batches skip drafting
    stats = ingest_once(log_dir, data_dir, flush_rows=5_000)
    assert not (data_dir / ROLLUP_DIR).exists()  # the ingester writes data only
    data_files = parquet_files(data_dir)
    assert len(data_files) >= 4
    written = build_missing(data_dir)
    assert sorted(rollup.removeprefix(f"{ROLLUP_DIR}/") for rollup in written) == data_files
    total = 0
    kinds: Counter[str] = Counter()
    for name in data_files:
        rows = pq.read_table(data_dir / name).to_pylist()
        stored = pq.read_table(rollup_path(data_dir, data_dir / name)).to_pylist()
        assert {tuple(r[k] for k in KEY): (r["request_steps"], r["first_event"], r["last_event"])
                for r in stored} == counted(rows)
        assert len(stored) < len(rows)
        total += sum(r["request_steps"] for r in stored)
        kinds.update(r["kind"] for r in rows)
    assert total == stats.rows
    assert len(kinds) == 4  # every kind is in the rollups checked above
    assert check_rollups(data_dir).clean
    assert build_missing(data_dir) == []  # nothing left to build
    assert len(build_missing(data_dir, rebuild=True)) == len(data_files)
