"""A data file's rollup: request-steps per minute, context bucket and outcome shape, equal to
a count of the file's rows in Python; the ingester leaves them to reports."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from specmetrics.queries.rollup import build_missing, check_rollups, rollup_path
from specmetrics.schemas.wire import step_event_to_wire
from specmetrics.storage.layout import ROLLUP_DIR, STATE_DIR
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event
from tests.support.ingest import ingest_once, ingest_tree_once, parquet_files
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
    assert sorted(str(p.relative_to(data_dir / ROLLUP_DIR)) for p in written) == data_files
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


def test_a_crash_after_a_rollup_was_built_takes_it_with_the_incomplete_flush(log_dir: Path, data_dir: Path) -> None:
    """A report may build the rollup of a file whose flush a crash cut short (its other file,
    of the next hour, never renamed into place, nor the commit made): the file is removed on
    restart, its rollup with it, and both files of the flush come back with the same rows."""
    writer = LocalLogWriter(log_dir)
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(minutes=40 * i)))
                   for i in range(3)])
    writer.close()
    ingest_tree_once(log_dir, data_dir, flush_event_time_s=7200)
    first, second = parquet_files(data_dir)
    rows_before = pq.read_table(data_dir / first)
    (data_dir / second).unlink()
    (data_dir / STATE_DIR / "log.offsets.json").unlink()
    build_missing(data_dir)
    assert rollup_path(data_dir, data_dir / first).exists()
    stats = ingest_tree_once(log_dir, data_dir, flush_event_time_s=7200)
    assert stats.rows == 12 and parquet_files(data_dir) == [first, second]
    assert pq.read_table(data_dir / first).equals(rows_before)
    check = check_rollups(data_dir)
    assert (check.missing, check.orphaned, check.unequal) == ([first, second], [], [])
