"""``specmetrics ingest``: a source into durable, exactly-once Parquet."""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specmetrics.heartbeat import Heartbeat
from specmetrics.ingest import Ingester, IngestSettings, IngestStats
from specmetrics.ingest.observer import IngestObserver
from specmetrics.ingest.sources import open_source
from specmetrics.ingest.sources.base import SourceUnavailable
from specmetrics.monitoring.exposition import MetricsServer
from specmetrics.monitoring.live import LiveMetrics
from specmetrics.progress import Progress
from specmetrics.storage.layout import STATE_DIR
from specmetrics.storage.location import S3Location, S3Settings, create_bucket, is_s3
from specmetrics.transport.url import transport_address

if TYPE_CHECKING:  # kafka-python is an optional dependency
    from specmetrics.ingest.dead_letter_topic import DeadLetterTopic

logger = logging.getLogger(__name__)

#: Following a source that failed: the first pause before trying again, and the longest.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("ingest", help="Ingest step events into hive-partitioned Parquet, exactly once.")
    parser.add_argument("--source", required=True,
                        help="What to read: file:///var/lib/specmetrics/log or kafka://host:9092/topic.")
    parser.add_argument("--out", required=True, help="Where the Delta Lake table is (a folder), or s3://bucket/prefix "
                        "for one on S3 (endpoint, region and credentials: SPECMETRICS_S3_*, the AWS environment "
                        "and files; docs/storage.md).")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="A local folder for the ingester's locks and offset hints (default: OUT/_state; for an "
                             "S3 output, ~/.local/state/specmetrics/BUCKET/PREFIX).")
    parser.add_argument("--once", action="store_true", help="Stop at the end of the source instead of following it.")
    parser.add_argument("--flush-rows", type=int, default=None,
                        help="Flush at this many request-steps (a dead letter counts as one).")
    parser.add_argument("--group", default=None,
                        help="Kafka consumer group (default: SPECMETRICS_INGEST_GROUP or specmetrics-ingest).")
    parser.add_argument("--dead-letter-topic", default=None,
                        help="Kafka topic for rejected records (default: <topic>.dead-letter; '' for none).")
    parser.add_argument("--accept-loss", action="store_true", default=None,
                        help="Offsets gone from the source (a deleted or truncated local log segment) are recorded "
                             "in the output ('specmetrics verify' reports them) and ingesting goes on; without it the "
                             "ingester stores what came before them and exits with an error naming them.")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="Serve the live corrected metrics for Prometheus on this port, path /metrics "
                             "(default: SPECMETRICS_INGEST_METRICS_PORT, or no endpoint); docs/metrics.md.")
    parser.add_argument("--quiet", action="store_true", help="No progress line.")
    parser.add_argument("--heartbeat-file", type=Path, default=None,
                        help="Rewrite this file (JSON: time and totals) every second while the loop runs, idle or "
                             "not; 'specmetrics health' checks its age.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in (("flush_rows", args.flush_rows), ("group", args.group),
                                   ("dead_letter_topic", args.dead_letter_topic),
                                   ("accept_loss", args.accept_loss),
                                   ("metrics_port", args.metrics_port))
                 if v is not None}
    stats = ingest_source(args.source, output(args.out), once=args.once, settings=IngestSettings(**overrides),
                          show_progress=not args.quiet, heartbeat_file=args.heartbeat_file, state_dir=args.state_dir)
    print(f"ingested {stats.rows:,} request-steps from {stats.records:,} records into {stats.files} file(s); "
          f"{stats.dead_letters} dead letter(s)" + (f"; {stats.lost_offsets:,} lost offset(s) recorded"
                                                    if stats.lost_offsets else ""))
    return 0


def output(target: str) -> Path | S3Location:
    """``--out``: an S3 prefix (its bucket created where SPECMETRICS_S3_CREATE_BUCKET says so), or a
    local folder."""
    if not is_s3(target):
        return Path(target)
    location = S3Location.parse(target)
    if S3Settings().create_bucket:
        create_bucket(location)
    return location


def ingest_source(url: str, out: Path | S3Location, once: bool, settings: IngestSettings | None = None,
                  show_progress: bool = True, heartbeat_file: Path | None = None,
                  state_dir: Path | None = None) -> IngestStats:
    """Run one ingester; SIGTERM and SIGINT flush and commit before it returns. With
    ``heartbeat_file``, that file is rewritten every second while the ingest loop runs.

    A source that fails (a broker unreachable or lost) ends ``once`` with
    :class:`~ingest.sources.base.SourceUnavailable`; when following, the failure is logged and
    the source opened again after a pause that doubles up to :data:`RETRY_MAX_S`. Each start
    resumes where the stored files end, so what was buffered and not flushed is read again
    and nothing twice."""
    settings = settings or IngestSettings()
    if state_dir is None:
        state_dir = out / STATE_DIR if isinstance(out, Path) else \
            Path("~/.local/state/specmetrics").expanduser() / out.bucket / out.prefix
    heartbeat = Heartbeat(heartbeat_file) if heartbeat_file else None
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    progress = Progress("ingest", unit="records")
    totals = IngestStats()
    pause_s = RETRY_FIRST_S
    failing_since = time.monotonic()  # of the source's failures in a row, the first
    live, server = _metrics_endpoint(settings)
    try:
        while True:
            records_before = totals.records
            try:
                _ingest(url, out, state_dir, once, settings, totals, live, lambda: stopping,
                        (lambda s: progress.update(totals.records + s.records)) if show_progress else None,
                        (lambda s, stalled: heartbeat.beat(_beat(s, stalled))) if heartbeat else None)
                break
            except SourceUnavailable as exc:
                if once or stopping:
                    raise
                if totals.records > records_before or pause_s == RETRY_FIRST_S:  # the first failure since it read
                    pause_s, failing_since = RETRY_FIRST_S, time.monotonic()
                logger.warning("%s; trying again in %.0f s", exc, pause_s)
                _pause(pause_s, lambda: stopping,
                       functools.partial(_beat_since, heartbeat, totals, failing_since) if heartbeat else None)
                pause_s = min(pause_s * 2, RETRY_MAX_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.close()
    if show_progress:
        progress.finish()
    return totals


def _beat(stats: IngestStats, stalled_s: float) -> dict[str, object]:
    """What the heartbeat file says: the totals, and how long the ingester has had work it does not do
    (``specmetrics health --max-stalled-s``)."""
    return {**asdict(stats), "stalled_s": round(stalled_s, 1)}


def _beat_since(heartbeat: Heartbeat, stats: IngestStats, since: float) -> None:
    """A heartbeat while the source cannot be reached: stalled since the first failure in a row."""
    heartbeat.beat(_beat(stats, time.monotonic() - since))


def _metrics_endpoint(settings: IngestSettings) -> tuple[LiveMetrics | None, MetricsServer | None]:
    """The live metrics and their HTTP endpoint, when a port is set: one for the whole run, so
    the totals go on across reconnections to the source."""
    if settings.metrics_port is None:
        return None, None
    live = LiveMetrics()
    try:
        server = MetricsServer(live, settings.metrics_port, settings.metrics_host)
    except OSError as exc:
        raise OSError(f"cannot serve the metrics on {settings.metrics_host}:{settings.metrics_port}: "
                      f"{exc.strerror or exc}") from None
    logger.info("serving the live metrics on http://%s:%d/metrics", settings.metrics_host, server.port)
    return live, server


def _ingest(url: str, out: Path | S3Location, state_dir: Path, once: bool, settings: IngestSettings,
            totals: IngestStats, observer: IngestObserver | None, should_stop: Callable[[], bool],
            progress: Callable[[IngestStats], None] | None, alive: Callable[[IngestStats, float], None] | None) -> None:
    """One source and ingester, from start to close; what it committed is added to ``totals``."""
    source = open_source(url, state_dir, settings.group)
    try:
        ingester = Ingester(source, out, settings, _dead_letter_topic(url, settings), observer)
        try:
            ingester.run(once, progress, should_stop=should_stop, alive=alive)
        finally:
            try:
                ingester.close()
            finally:
                _add(totals, ingester.stats)
    finally:
        source.close()


def _add(totals: IngestStats, stats: IngestStats) -> None:
    for field in fields(IngestStats):
        setattr(totals, field.name, getattr(totals, field.name) + getattr(stats, field.name))


def _pause(seconds: float, should_stop: Callable[[], bool], alive: Callable[[], None] | None) -> None:
    """Sleep ``seconds``, or less if told to stop; beat the heartbeat meanwhile."""
    deadline = time.monotonic() + seconds
    while not should_stop() and time.monotonic() < deadline:
        if alive:
            alive()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def _dead_letter_topic(url: str, settings: IngestSettings) -> DeadLetterTopic | None:
    """The dead-letter topic beside a Kafka source (none for a local log, or when switched off)."""
    address = transport_address(url, "source")
    if isinstance(address, str) or settings.dead_letter_topic == "":
        return None
    from specmetrics.ingest.dead_letter_topic import DeadLetterTopic

    return DeadLetterTopic(address, settings.dead_letter_topic or f"{address.topic}.dead-letter")
