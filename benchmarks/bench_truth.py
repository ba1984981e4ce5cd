"""The load generator's exact ground truth reproduced by the views and by the report at scale
(default 10M request-steps): load generator → local log → ingest → views, every counter of
every engine compared; exit code 1 on any difference. Prints one JSON line with the timings.

    python -m benchmarks.bench_truth [--rows 10000000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.args import positive_int
from specmetrics.emitter.loadgen import EngineTruth, LoadSpec, run_load
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.ingest import Ingester, IngestSettings
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.queries import connect, run_query
from specmetrics.reports import Window, collect
from specmetrics.storage.layout import STATE_DIR


def differences(data: Path, truth: dict[str, EngineTruth]) -> list[str]:
    """Every counter of the views (and the report's totals) that differs from the truth."""
    con = connect(data)
    try:
        diff = {r["engine_id"]: r for r in run_query(con, "FROM acceptance_diff").to_pylist()}
        k_zero_reasons = run_query(
            con, "SELECT engine_id, k_zero_reason, request_steps FROM k_zero_reasons").to_pylist()
        kinds = run_query(con, "SELECT engine_id, kind, sum(request_steps) AS n FROM outcome_shares GROUP BY ALL")
        positions = run_query(con, """
            SELECT c.engine_id, c.position, c.num_accepted, c.num_reached, v.num_accepted_tokens_per_pos
            FROM acceptance_per_position c JOIN acceptance_vllm_per_position v
                USING (engine_id, model, method, num_spec_tokens, position)
            ORDER BY c.engine_id, c.position""").to_pylist()
        report = collect(con, Window(None, None)).headline
    finally:
        con.close()
    wrong: list[str] = []

    def check(what: str, got: Any, want: Any) -> None:
        if got != want:
            wrong.append(f"{what}: views {got}, truth {want}")

    for engine, t in truth.items():
        row = diff[engine]
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "vllm_num_drafts",
                     "vllm_num_draft_tokens", "vllm_num_accepted_tokens"):
            check(f"{engine} {name}", row[name], getattr(t, name))
        check(f"{engine} k_zero_reasons", {r["k_zero_reason"]: r["request_steps"] for r in k_zero_reasons
                                           if r["engine_id"] == engine}, t.k_zero_reasons)
        check(f"{engine} kinds", {r["kind"]: r["n"] for r in kinds.to_pylist() if r["engine_id"] == engine},
              t.request_steps)
        mine = [p for p in positions if p["engine_id"] == engine]
        check(f"{engine} per position", [(p["num_accepted"], p["num_reached"], p["num_accepted_tokens_per_pos"])
                                         for p in mine],
              list(zip(t.accepted_per_pos, t.reached_per_pos, t.vllm_accepted_per_pos, strict=True)))
    for name in ("num_drafts", "vllm_num_drafts", "num_accepted_tokens", "vllm_num_accepted_tokens"):
        check(f"report {name}", report[name], sum(getattr(t, name) for t in truth.values()))
    return wrong


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=positive_int, default=10_000_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        with LocalLogSink(root / "log") as sink:
            truth = run_load(LoadSpec(rows=args.rows, engines=4, seed=10, num_spec_tokens=4,
                                      acceptance=(0.9, 0.75, 0.6, 0.5), drafter_max_len=2000,
                                      grammar_invalid_rate=0.05, k_zero_rate=0.08), sink)
        generated = time.perf_counter()
        source = LocalLogSource(root / "log", root / "data" / STATE_DIR)
        ingester = Ingester(source, root / "data", IngestSettings())
        try:
            rows = ingester.run(once=True).rows
        finally:
            ingester.close()
            source.close()
        ingested = time.perf_counter()
        wrong = differences(root / "data", truth)
        checked = time.perf_counter()
    print(json.dumps({"rows": rows, "engines": len(truth), "matches_truth": not wrong,
                      "loadgen_s": round(generated - start, 1), "ingest_s": round(ingested - generated, 1),
                      "views_and_report_s": round(checked - ingested, 1)}))
    if wrong:
        raise SystemExit("\n".join(wrong))


if __name__ == "__main__":
    main()
