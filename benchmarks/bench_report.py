"""The full report's queries over many request-step rows, next to the same metrics computed
with pandas and with polars, and a bare DuckDB scan of the columns they need (the floor), in
the same run. The report reads the rollups stored next to the data, as ``specmetrics report``
does once it has built them (here ``build_missing`` builds them, timed, when the cached table
lacks them), with its per-request sections (one more scan of the raw rows) and without them
(``--no-requests``, what the targets and pandas and polars compare); the same report over the raw
rows is timed too. Best of ``--rounds`` each; page cache warm (a first untimed
scan). Checks that the rollups equal their recomputation from the raw rows (``specmetrics
verify``'s check) and that the four ways agree on the headline and per-group numbers (and the
report's ways on its audit line: every row of the table carries vLLM's own counters), then
prints one JSON line.

    python -m benchmarks.bench_report [--rows 100000000] [--rounds 2] [--dir /var/tmp/specmetrics-bench]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.args import positive_int
from benchmarks.report_rows import BATCH, FILES, build_table, whole_steps
from specmetrics.queries import connect
from specmetrics.queries.rollup import build_missing, check_rollups, rollups_cover
from specmetrics.reports import Window, collect

NEEDED = ("engine_id", "model", "method", "num_spec_tokens", "event_time", "kind", "k_zero_reason", "k_sched",
          "k_valid", "k_invalid", "accepted", "batch_max_seq_len")
BUCKET_US = 15 * 60 * 1_000_000  # the report's automatic bucket for ten hours of data
GROUP = ["engine_id", "model", "method", "num_spec_tokens"]
#: The report's audit line (request-steps checked against vLLM's own counters, and in steps that
#: differ, per engine): the report's ways must agree on it; pandas and polars do not compute it.
AUDIT = "audit"


def floor(root: Path) -> dict[str, Any]:
    """A bare scan: every needed column read once, nothing grouped."""
    con = duckdb.connect()
    aggregates = ", ".join(f"max({c})" if c in ("engine_id", "model", "method", "kind", "k_zero_reason", "event_time")
                           else f"sum({c})" for c in NEEDED)
    con.execute(f"SELECT {aggregates} FROM read_parquet(?)", [str(root / "dt=*/hour=*/*.parquet")]).fetchall()
    con.close()
    return {}


def report(root: Path, stored: bool | None = None, requests: bool = True) -> dict[str, Any]:
    """Every query of ``specmetrics report`` (the collect step; rendering is milliseconds), from
    the rollups when they cover the tree (as the command decides), or as ``stored`` says;
    without the per-request sections (``--no-requests``) when ``requests`` is false."""
    covered = rollups_cover(root) if stored is None else stored
    con = connect(root)
    try:
        data = collect(con, Window(None, None), bucket=timedelta(microseconds=BUCKET_US), stored_rollups=covered,
                       requests=requests)
    finally:
        con.close()
    return {**summary(data.headline["num_drafts"], data.headline["vllm_num_drafts"],
                      data.headline["num_accepted_tokens"], len(data.timeline),
                      [(g["engine_id"], g["num_drafts"], g["vllm_num_drafts"]) for g in data.groups]),
            AUDIT: [(a["engine_id"], a["audited_request_steps"], a["differing_request_steps"]) for a in data.audit]}


def report_without_requests(root: Path) -> dict[str, Any]:
    """``specmetrics report --no-requests``: the rollups alone."""
    return report(root, requests=False)


def report_raw(root: Path) -> dict[str, Any]:
    """The report's queries over the raw rows (no rollups)."""
    return report(root, stored=False)


def summary(drafts: Any, vllm_drafts: Any, accepted: Any, buckets: int, groups: list[tuple[Any, Any, Any]]
            ) -> dict[str, Any]:
    """What the three ways must agree on: totals, the number of time buckets, per-engine drafts."""
    return {"drafts": int(drafts), "vllm_drafts": int(vllm_drafts), "accepted": int(accepted), "timeline": buckets,
            "groups": sorted((str(e), int(d), int(v)) for e, d, v in groups)}


def pandas_report(root: Path) -> dict[str, Any]:
    import pandas as pd
    import pyarrow.parquet as pq

    df = pq.read_table(root, columns=list(NEEDED)).to_pandas()
    draft = (df["kind"] == "drafted") | ((df["kind"] == "grammar_invalid") & (df["k_valid"] > 0))
    vllm = df["k_sched"] > 0
    frame = pd.DataFrame({
        **{c: df[c] for c in GROUP}, "bucket": df["event_time"].astype("int64") // BUCKET_US,
        "context": df["batch_max_seq_len"] // 256, "skipped": df["kind"] == "skipped_for_length",
        "d": draft, "dt": df["k_valid"].where(draft, 0), "da": df["accepted"].where(draft, 0),
        "v": vllm, "vt": df["k_valid"].where(vllm, 0), "va": df["accepted"].where(vllm, 0)})
    groups = frame.groupby(GROUP, observed=True)[["d", "dt", "da", "v", "vt", "va"]].sum()
    timeline = frame.groupby("bucket")[["dt", "da", "vt", "va"]].sum()
    frame.groupby("context")[["skipped", "dt", "da", "vt", "va"]].sum()
    df.loc[df["kind"] == "k_zero", "k_zero_reason"].value_counts()
    positions = {i: ((df["accepted"] > i) & draft).sum() for i in range(5)}
    positions.update({-i - 1: ((df["k_valid"] > i) & draft).sum() for i in range(5)})
    positions.update({10 + i: ((df["accepted"] > i) & vllm).sum() for i in range(5)})
    return summary(groups["d"].sum(), groups["v"].sum(), groups["da"].sum(), len(timeline),
                   [(k[0], r["d"], r["v"]) for k, r in groups.iterrows()])


def polars_report(root: Path) -> dict[str, Any]:
    import polars as pl

    scan = pl.scan_parquet(root / "dt=*/hour=*/*.parquet", hive_partitioning=False).select(NEEDED)
    draft = (pl.col("kind") == "drafted") | ((pl.col("kind") == "grammar_invalid") & (pl.col("k_valid") > 0))
    vllm = pl.col("k_sched") > 0
    base = scan.with_columns(
        d=draft, v=vllm, dt=pl.when(draft).then(pl.col("k_valid")).otherwise(0),
        da=pl.when(draft).then(pl.col("accepted")).otherwise(0),
        vt=pl.when(vllm).then(pl.col("k_valid")).otherwise(0), va=pl.when(vllm).then(pl.col("accepted")).otherwise(0),
        bucket=pl.col("event_time").dt.epoch("us") // BUCKET_US, context=pl.col("batch_max_seq_len") // 256,
        skipped=pl.col("kind") == "skipped_for_length")
    sums = [pl.col(c).sum() for c in ("d", "dt", "da", "v", "vt", "va")]
    groups, timeline, _, _, _ = pl.collect_all([
        base.group_by(GROUP).agg(sums),
        base.group_by("bucket").agg(sums),
        base.group_by("context").agg([pl.col("skipped").sum(), *sums]),
        base.filter(pl.col("kind") == "k_zero").group_by("k_zero_reason").len(),
        base.select([((pl.col("accepted") > i) & pl.col("d")).sum().alias(f"a{i}") for i in range(5)]
                    + [((pl.col("k_valid") > i) & pl.col("d")).sum().alias(f"r{i}") for i in range(5)]
                    + [((pl.col("accepted") > i) & pl.col("v")).sum().alias(f"v{i}") for i in range(5)]),
    ])
    return summary(groups["d"].sum(), groups["v"].sum(), groups["da"].sum(), timeline.height,
                   [(r["engine_id"], r["d"], r["v"]) for r in groups.iter_rows(named=True)])


def best(fn: Callable[[Path], dict[str, Any]], root: Path, rounds: int) -> tuple[float, dict[str, Any]]:
    times, result = [], {}
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        result = fn(root)
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=positive_int, default=100_000_000)
    parser.add_argument("--rounds", type=positive_int, default=2)
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/specmetrics-bench"),
                        help="Where the generated table is kept between runs (~1 GB at 100M rows).")
    args = parser.parse_args(argv)
    rows = whole_steps(args.rows)
    if rows == 0:
        parser.error(f"--rows must be at least {FILES * BATCH:,}: {FILES} files of whole {BATCH}-request steps")
    if rows != args.rows:
        print(f"--rows {args.rows:,} rounded down to {rows:,}: {FILES} files of whole {BATCH}-request steps",
              file=sys.stderr)
    root = build_table(args.dir / f"rows-{rows}", rows)
    start = time.perf_counter()
    built = len(build_missing(root))
    rollup_build_s = time.perf_counter() - start
    start = time.perf_counter()
    check = check_rollups(root)
    verify_s = time.perf_counter() - start
    if not check.clean or not rollups_cover(root):
        raise SystemExit(f"the rollups do not match the raw rows: {check}")
    floor(root)  # warm the page cache
    floor_s, _ = best(floor, root, args.rounds)
    report_s, got = best(report, root, args.rounds)
    without_requests_s, by_rollups = best(report_without_requests, root, args.rounds)
    raw_s, by_raw = best(report_raw, root, args.rounds)
    polars_s, by_polars = best(polars_report, root, args.rounds)
    pandas_s, by_pandas = best(pandas_report, root, args.rounds)
    audits = [result.pop(AUDIT) for result in (got, by_rollups, by_raw)]
    agree = got == by_rollups == by_raw == by_polars == by_pandas and audits[0] == audits[1] == audits[2]
    audited = sum(checked for _, checked, _ in audits[0])
    print(json.dumps({
        "rows": rows, "floor_s": round(floor_s, 3), "report_s": round(report_s, 3),
        "report_without_requests_s": round(without_requests_s, 3),
        "report_raw_s": round(raw_s, 3), "polars_s": round(polars_s, 3), "pandas_s": round(pandas_s, 3),
        "report_over_floor": round(report_s / floor_s, 2), "report_raw_over_floor": round(raw_s / floor_s, 2),
        "pandas_over_report": round(pandas_s / report_s, 2), "polars_over_report": round(polars_s / report_s, 2),
        "rollups_built": built, "rollup_build_s": round(rollup_build_s, 2) if built else None,
        "rollups_verified_s": round(verify_s, 2), "results_agree": agree,
        # every row carries vLLM's own counters: the report audits them all, none differs
        "audited_request_steps": audited,
        "audit_complete": audited == rows and not any(d for a in audits for *_, d in a),
        # The targets are the aggregations pandas and polars compute too: the report without its
        # per-request sections, which read the raw rows besides (report_s).
        "targets_met": agree and without_requests_s <= 2 * floor_s and without_requests_s < 3
        and pandas_s >= 5 * without_requests_s and polars_s > without_requests_s,
    }))
    if not agree:
        raise SystemExit(f"the four ways disagree:\nreport {got}\nraw {by_raw}\npolars {by_polars}\n"
                         f"pandas {by_pandas}")


if __name__ == "__main__":
    main()
