"""``specmetrics ingest``: a source into durable, exactly-once Parquet."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any

from ingest import Ingester, IngestSettings, IngestStats
from ingest.output import STATE_DIR
from ingest.sources import open_source
from specmetrics.progress import Progress


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("ingest", help="Ingest step events into hive-partitioned Parquet, exactly once.")
    parser.add_argument("--source", required=True, help="What to read, e.g. file:///var/lib/specmetrics/log.")
    parser.add_argument("--out", required=True, type=Path, help="Output directory of the Parquet tree.")
    parser.add_argument("--once", action="store_true", help="Stop at the end of the source instead of following it.")
    parser.add_argument("--flush-rows", type=int, default=None, help="Flush at this many request outcomes.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    stats = ingest_source(args.source, args.out, once=args.once, flush_rows=args.flush_rows)
    print(f"ingested {stats.rows:,} request outcomes from {stats.records:,} records into {stats.files} file(s); "
          f"{stats.dead_letters} dead letter(s)")
    return 0


def ingest_source(url: str, out: Path, once: bool, flush_rows: int | None = None, show_progress: bool = True
                  ) -> IngestStats:
    """Run one ingester; SIGTERM and SIGINT flush and commit before it returns."""
    settings = IngestSettings(flush_rows=flush_rows) if flush_rows else IngestSettings()
    ingester = Ingester(open_source(url, out / STATE_DIR), out, settings)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    progress = Progress("ingest", unit="records")
    try:
        stats = ingester.run(once, (lambda s: progress.update(s.records)) if show_progress else None,
                             should_stop=lambda: stopping)
    finally:
        ingester.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if show_progress:
        progress.finish()
    return stats
