"""Readers' start-up over a table of many files, and the conversion of a tree of them.

Ingests a local log with one flush per ``--rows-per-file`` rows (``--files`` data files), copies
its files without the table's log (a tree, as ingest wrote before tables) and converts that copy
into a table (``specmetrics table convert``: one commit naming them all, timed), then, in a fresh
process per measurement (modules imported, nothing cached), times what every reader does first:
choosing the files from the log (``storage.readable.select_files``), then building the views over
them (``queries.connect``). Best of ``--rounds``. Prints one JSON line.

    python -m benchmarks.bench_table [--files 10000] [--rows-per-file 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.args import positive_int
from specmetrics.emitter.loadgen import LoadSpec, run_load
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.ingest import Ingester, IngestSettings
from specmetrics.ingest.convert import convert_tree
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.storage.layout import STATE_DIR
from specmetrics.storage.table import LOG_DIR

ROOT = Path(__file__).resolve().parents[1]
#: Run in a fresh process: the seconds select_files and connect take over the folder argv[1].
_MEASURE = """
import json, sys, time
from pathlib import Path
from specmetrics.queries import connect
from specmetrics.storage.readable import select_files
start = time.perf_counter()
files = select_files(Path(sys.argv[1]))
selected = time.perf_counter()
connect(Path(sys.argv[1])).close()
print(json.dumps({"files": len(files.data), "select_s": selected - start, "connect_s": time.perf_counter() - selected}))
"""


def measure(data: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(data)], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    measured: dict[str, float] = json.loads(done.stdout)
    return measured


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=positive_int, default=10_000)
    parser.add_argument("--rows-per-file", type=positive_int, default=64, help="A multiple of 64 (rows per step).")
    parser.add_argument("--rounds", type=positive_int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with LocalLogSink(root / "log") as sink:
            run_load(LoadSpec(rows=args.files * args.rows_per_file, engines=4, seed=1), sink)
        source = LocalLogSource(root / "log", root / "ingested" / STATE_DIR)
        ingester = Ingester(source, root / "ingested", IngestSettings(flush_rows=args.rows_per_file))
        try:
            ingester.run(once=True)
        finally:
            ingester.close()
            source.close()
        shutil.copytree(root / "ingested", root / "table", ignore=shutil.ignore_patterns(LOG_DIR))
        start = time.perf_counter()
        converted = convert_tree(root / "table")
        convert_s = time.perf_counter() - start
        runs = [measure(root / "table") for _ in range(args.rounds)]
        assert {m["files"] for m in runs} == {converted.files}, runs
        print(json.dumps({
            "bench": "table_reader_start", "files": converted.files, "convert_s": round(convert_s, 3),
            "table_select_s": round(min(m["select_s"] for m in runs), 3),
            "table_connect_s": round(min(m["connect_s"] for m in runs), 3),
        }))


if __name__ == "__main__":
    main()
