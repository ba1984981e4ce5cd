"""A data file's rollup: request-steps per minute, context bucket and outcome shape, and each
request's counts per minute, equal to counts of the file's rows in Python; the ingester leaves
them to reports."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from specmetrics.queries.rollup import build_missing, check_rollups
from specmetrics.storage.layout import ROLLUP_DIR
from tests.support.ingest import ingest_once, parquet_files, rollup_path
from tests.support.loadgen import write_load

KEY = ("engine_id", "model", "method", "num_spec_tokens", "minute", "context_start", "kind", "k_zero_reason",
       "k_sched", "k_valid", "k_invalid", "accepted")
PER_REQUEST = ("request_steps", "skips", "collateral_skips", "own_skips", "lost_draft_tokens", "num_drafts",
               "num_draft_tokens", "num_accepted_tokens", "emitted_tokens", "first_event", "last_event")


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


def counted_per_request(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The rows per request of the rollup of ``rows``, computed in Python."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["engine_id"], row["model"], row["method"], row["num_spec_tokens"],
               row["event_time"].replace(second=0, microsecond=0), row["request_id"])
        groups.setdefault(key, []).append(row)
    counts = {}
    for key, steps in groups.items():
        drafts = [r for r in steps if r["kind"] == "drafted" or (r["kind"] == "grammar_invalid" and r["k_valid"] > 0)]
        skips = [r for r in steps if r["kind"] == "skipped_for_length"]
        fits = [r["seq_len"] is not None and r["drafter_max_len"] is not None
                and r["seq_len"] + r["num_spec_tokens"] <= r["drafter_max_len"] for r in skips]
        known = [r["seq_len"] is not None and r["drafter_max_len"] is not None for r in skips]
        counts[key] = {
            "request_steps": len(steps), "skips": len(skips), "collateral_skips": sum(fits),
            "own_skips": sum(k and not f for k, f in zip(known, fits, strict=True)),
            "lost_draft_tokens": sum(r["k_valid"] for r, f in zip(skips, fits, strict=True) if f),
            "num_drafts": len(drafts), "num_draft_tokens": sum(r["k_valid"] for r in drafts),
            "num_accepted_tokens": sum(r["accepted"] for r in drafts),
            "emitted_tokens": sum(r["emitted"] for r in steps),
            "first_event": min(r["event_time"] for r in steps), "last_event": max(r["event_time"] for r in steps)}
    return counts


def test_every_data_file_gets_a_rollup_equal_to_a_count_of_its_rows(log_dir: Path, data_dir: Path) -> None:
    write_load(log_dir, rows=20_000, seed=3, engines=2, drafter_max_len=1500)  # some batches skip drafting
    stats = ingest_once(log_dir, data_dir, flush_rows=5_000)
    assert not (data_dir / ROLLUP_DIR).exists()  # the ingester writes data only
    data_files = parquet_files(data_dir)
    assert len(data_files) >= 4
    calls: list[tuple[int, int]] = []
    written = build_missing(data_dir, progress=lambda done, total: calls.append((done, total)))
    assert [rollup.removeprefix(f"{ROLLUP_DIR}/") for rollup in written] == data_files  # in order, built side by side
    assert calls == [(done, len(data_files)) for done in range(1, len(data_files) + 1)]
    total = 0
    kinds: Counter[str] = Counter()
    skips: Counter[str] = Counter()
    for name in data_files:
        rows = pq.read_table(data_dir / name).to_pylist()
        rollup = pq.read_table(rollup_path(data_dir, data_dir / name))
        stored = [r for r in rollup.to_pylist() if r["request_id"] is None]
        assert {tuple(r[k] for k in KEY): (r["request_steps"], r["first_event"], r["last_event"])
                for r in stored} == counted(rows)
        per_request = rollup.to_pylist()[len(stored):]  # in row groups after the shapes'
        assert {tuple(r[k] for k in (*KEY[:5], "request_id")): {k: r[k] for k in PER_REQUEST}
                for r in per_request} == counted_per_request(rows)
        assert [rollup.num_rows for rollup in map(pq.ParquetFile(data_dir / ROLLUP_DIR / name).read_row_group,
                                                   range(2))] == [len(stored), len(per_request)]
        assert len(stored) < len(rows)
        total += sum(r["request_steps"] for r in stored)
        kinds.update(r["kind"] for r in rows)
        skips.update(collateral=sum(r["collateral_skips"] for r in per_request),
                     own=sum(r["own_skips"] for r in per_request))
    assert total == stats.rows
    assert len(kinds) == 4  # every kind is in the rollups checked above
    assert skips["collateral"] > 0 and skips["own"] > 0, skips  # and both kinds of skip
    assert check_rollups(data_dir).clean
    assert build_missing(data_dir) == []  # nothing left to build
    assert len(build_missing(data_dir, rebuild=True)) == len(data_files)
