"""Readers' start-up over a table of many files, and the conversion of a tree of them.

Ingests a local log with one flush per ``--rows-per-file`` rows (``--files`` data files), copies
its files without the table's log (a tree, as ingest wrote before tables) and converts that copy
into a table (``specmetrics table convert``: one commit naming them all, timed), then, in a fresh
process per measurement (modules imported, nothing cached), times what every reader does first:
choosing the files from the log (``storage.readable.select_files``), then building the views over
them (``queries.connect``); and, over the table the ingester wrote (whose commits record each
file's statistics), a count of the rows of the last tenth of its time span through a connection
over every file and through one of that window (the files its statistics place there). Best of
``--rounds``. Prints one JSON line.

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
#: Run in a fresh process: the seconds select_files and connect take over the folder argv[1]; then
#: (argv[2] "window") a count of the rows of the span's last tenth over all the files, or over a
#: connection of that window (the files whose statistics place rows in it).
_MEASURE = """
import json, sys, time
from pathlib import Path
from specmetrics.queries import connect, run_query
from specmetrics.storage.readable import select_files
from specmetrics.storage.table import Table
data = Path(sys.argv[1])
if sys.argv[2] == "start":
    start = time.perf_counter()
    files = select_files(data)
    selected = time.perf_counter()
    connect(data).close()
    print(json.dumps({"files": len(files.data), "select_s": selected - start,
                      "connect_s": time.perf_counter() - selected}))
    sys.exit()
every = Table(data).files()
first, last = min(f.first_event for f in every), max(f.last_event for f in every)
since = last - (last - first) / 10
start = time.perf_counter()
con = connect(data, since) if sys.argv[2] == "window" else connect(data)
rows = run_query(con, "SELECT count(*) AS n FROM request_steps_between($t0, NULL)", {"t0": since}).to_pylist()[0]["n"]
print(json.dumps({"files": len(select_files(data, since).data), "rows": rows, "s": time.perf_counter() - start}))
"""


def measure(data: Path, what: str = "start") -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(data), what], cwd=ROOT, capture_output=True, text=True,
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
        # the rows of the span's last tenth: over every file, and over a connection of that window, in turns
        counts = [measure(root / "ingested", what) for _ in range(args.rounds) for what in ("all", "window")]
        assert len({m["rows"] for m in counts}) == 1, counts
        print(json.dumps({
            "bench": "table_reader_start", "files": converted.files, "convert_s": round(convert_s, 3),
            "table_select_s": round(min(m["select_s"] for m in runs), 3),
            "table_connect_s": round(min(m["connect_s"] for m in runs), 3),
            "window_files": counts[1]["files"], "window_rows": counts[0]["rows"],
            "window_query_over_all_files_s": round(min(m["s"] for m in counts[::2]), 3),
            "window_query_over_its_files_s": round(min(m["s"] for m in counts[1::2]), 3),
        }))


if __name__ == "__main__":
    main()
