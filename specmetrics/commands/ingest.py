"""``specmetrics ingest``: a source into durable, exactly-once Parquet."""

from __future__ import annotations

import argparse
import signal
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest import Ingester, IngestSettings, IngestStats
from ingest.output import STATE_DIR
from ingest.sources import open_source
from specmetrics.heartbeat import Heartbeat
from specmetrics.progress import Progress

if TYPE_CHECKING:  # kafka-python is an optional dependency
    from ingest.dead_letter_topic import DeadLetterTopic


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("ingest", help="Ingest step events into hive-partitioned Parquet, exactly once.")
    parser.add_argument("--source", required=True,
                        help="What to read: file:///var/lib/specmetrics/log or kafka://host:9092/topic.")
    parser.add_argument("--out", required=True, type=Path, help="Output directory of the Parquet tree.")
    parser.add_argument("--once", action="store_true", help="Stop at the end of the source instead of following it.")
    parser.add_argument("--flush-rows", type=int, default=None,
                        help="Flush at this many request outcomes (a dead letter counts as one).")
    parser.add_argument("--group", default=None,
                        help="Kafka consumer group (default: SPECMETRICS_INGEST_GROUP or specmetrics-ingest).")
    parser.add_argument("--dead-letter-topic", default=None,
                        help="Kafka topic for rejected records (default: <topic>.dead-letter; '' for none).")
    parser.add_argument("--accept-loss", action="store_true", default=None,
                        help="Offsets gone from the source (a deleted or truncated local log segment) are recorded "
                             "in the tree ('specmetrics verify' reports them) and ingesting goes on; without it the "
                             "ingester stores what came before them and exits with an error naming them.")
    parser.add_argument("--quiet", action="store_true", help="No progress line.")
    parser.add_argument("--heartbeat-file", type=Path, default=None,
                        help="Rewrite this file (JSON: time and totals) every second while the loop runs, idle or "
                             "not; 'specmetrics health' checks its age.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("flush_rows", args.flush_rows), ("group", args.group),
                                   ("dead_letter_topic", args.dead_letter_topic),
                                   ("accept_loss", args.accept_loss)) if v is not None}
    stats = ingest_source(args.source, args.out, once=args.once, settings=IngestSettings(**overrides),
                          show_progress=not args.quiet, heartbeat_file=args.heartbeat_file)
    print(f"ingested {stats.rows:,} request outcomes from {stats.records:,} records into {stats.files} file(s); "
          f"{stats.dead_letters} dead letter(s)" + (f"; {stats.lost_offsets:,} lost offset(s) recorded"
                                                    if stats.lost_offsets else ""))
    return 0


def ingest_source(url: str, out: Path, once: bool, settings: IngestSettings | None = None,
                  show_progress: bool = True, heartbeat_file: Path | None = None) -> IngestStats:
    """Run one ingester; SIGTERM and SIGINT flush and commit before it returns. With
    ``heartbeat_file``, that file is rewritten every second while the ingest loop runs."""
    settings = settings or IngestSettings()
    heartbeat = Heartbeat(heartbeat_file) if heartbeat_file else None
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    source = open_source(url, out / STATE_DIR, settings.group)
    try:
        ingester = Ingester(source, out, settings, _dead_letter_topic(url, settings))
        progress = Progress("ingest", unit="records")
        try:
            stats = ingester.run(once, (lambda s: progress.update(s.records)) if show_progress else None,
                                 should_stop=lambda: stopping,
                                 alive=(lambda s: heartbeat.beat(asdict(s))) if heartbeat else None)
        finally:
            ingester.close()
    finally:
        source.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if show_progress:
        progress.finish()
    return stats


def _dead_letter_topic(url: str, settings: IngestSettings) -> DeadLetterTopic | None:
    if not url.startswith("kafka:") or settings.dead_letter_topic == "":
        return None
    from emitter.kafka import KafkaAddress
    from ingest.dead_letter_topic import DeadLetterTopic

    address = KafkaAddress.parse(url)
    return DeadLetterTopic(address, settings.dead_letter_topic or f"{address.topic}.dead-letter")
