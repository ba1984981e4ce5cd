"""``specmetrics table optimize`` against delta-rs's own ``optimize.compact()``, on copies of one table.

Ingests a local log into a table with one flush per ``--rows-per-file`` rows, copies it, and merges
the small files of each copy: one with the project's compaction (``storage.compaction``: runs of
flushes whose offsets follow each other, merged into one file named for the whole run), the other
with delta-rs's (bin-packing into ``part-...`` files). Rounds alternate the two on fresh copies;
the best of each is reported, with what each leaves: data files, rows (each once), and how many of
the files carry their offsets in their names, which ``verify`` checks and the ingester resumes from
(a ``part-...`` file names none). Prints one JSON line.

    python -m benchmarks.bench_optimize [--rows 2000000] [--rows-per-file 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath

from deltalake import DeltaTable

from benchmarks.args import positive_int
from specmetrics.emitter.loadgen import LoadSpec, run_load
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.ingest import Ingester, IngestSettings
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.queries import connect
from specmetrics.queries.verify import verify_table
from specmetrics.storage.compaction import compact
from specmetrics.storage.layout import STATE_DIR, FileName
from specmetrics.storage.table import Table


def build(root: Path, rows: int, rows_per_file: int) -> Path:
    with LocalLogSink(root / "log") as sink:
        run_load(LoadSpec(rows=rows, engines=2, seed=7), sink)
    source = LocalLogSource(root / "log", root / "table" / STATE_DIR)
    ingester = Ingester(source, root / "table", IngestSettings(flush_rows=rows_per_file))
    try:
        ingester.run(once=True)
    finally:
        ingester.close()
        source.close()
    return root / "table"


def outcome(table: Path) -> dict[str, int]:
    files = Table(table).files()
    con = connect(table)
    try:
        [(rows, distinct)] = con.execute(
            "SELECT count(*), count(DISTINCT (event_id, request_id)) FROM request_steps").fetchall()
    finally:
        con.close()
    named = sum(FileName.parse(PurePosixPath(file.relative).name) is not None for file in files)
    return {"files": len(files), "rows": int(rows), "distinct": int(distinct), "files_naming_offsets": named,
            "verify_clean": int(verify_table(table).clean)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=positive_int, default=2_000_000)
    parser.add_argument("--rows-per-file", type=positive_int, default=20_000)
    parser.add_argument("--rounds", type=positive_int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        original = build(Path(tmp), args.rows, args.rows_per_file)
        before = len(Table(original).files())
        best: dict[str, float] = {}
        after: dict[str, dict[str, int]] = {}
        for _ in range(args.rounds):
            for name in ("specmetrics", "delta_rs"):
                copy = Path(tmp) / name
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(original, copy)
                start = time.perf_counter()
                if name == "specmetrics":
                    compact(Table(copy), target_rows=1_000_000)
                else:
                    DeltaTable(str(copy)).optimize.compact(target_size=64 * 1024**2)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
                after[name] = outcome(copy)
    print(json.dumps({"bench": "optimize", "rows": args.rows, "files_before": before,
                      "specmetrics_s": round(best["specmetrics"], 3), "delta_rs_s": round(best["delta_rs"], 3),
                      "delta_rs_vs_specmetrics": round(best["specmetrics"] / best["delta_rs"], 2),
                      **{f"{name}_{key}": value for name, result in after.items() for key, value in result.items()}}))


if __name__ == "__main__":
    main()
