"""``specmetrics report``: a metric report for a time window, once or on a schedule."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from specmetrics.commands import DATA_HELP
from specmetrics.progress import Progress
from specmetrics.queries import connect
from specmetrics.queries.rollup import build_missing, rollups_cover, window_files
from specmetrics.reports import Window, collect, parse_duration, parse_formats, write_report
from specmetrics.reports.writer import prune_reports
from specmetrics.scheduled import add_schedule_arguments, run_as_scheduled
from specmetrics.storage.location import S3Location, data_root

log = logging.getLogger("specmetrics.report")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report", help="Render a metric report (Markdown, self-contained HTML) for a time window; --every repeats it.")
    parser.add_argument("--data", required=True, help=DATA_HELP)
    parser.add_argument("--out", required=True, type=Path,
                        help="Folder for report-<UTC time>.<format> files and latest.<format>.")
    parser.add_argument("--since", default=None,
                        help="Window start: an ISO time (UTC unless it has an offset) or a duration before the run "
                             "time (24h, 7d). Default: the first event.")
    parser.add_argument("--until", default=None,
                        help="Window end (exclusive), as --since. Default: after the last event.")
    parser.add_argument("--format", default="md,html", help="Comma-separated formats: md, html (default: md,html).")
    parser.add_argument("--bucket", default=None,
                        help="Timeline bucket width (5s, 1m, 15m, 1h); default: at most 120 buckets, of whole minutes "
                             "(which stored rollups give) unless the events span under 10 minutes.")
    parser.add_argument("--context-tokens", type=int, default=256,
                        help="Width of the context-length buckets in tokens (default 256).")
    add_schedule_arguments(parser, "wrote its report")
    parser.add_argument("--keep", type=int, default=None,
                        help="Keep only the newest N timestamped reports in --out (latest.* stay); default: all.")
    parser.add_argument("--raw", action="store_true",
                        help="Read the raw rows only: neither build nor read the rollups under DATA/_rollup "
                             "(default: build those the window's days lack, then read them).")
    parser.add_argument("--no-requests", dest="requests", action="store_false",
                        help="Leave out the sections about single requests (collateral skips, requests by their own "
                             "acceptance, outliers): they add up each request's counts in the window.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    formats = parse_formats(args.format)
    bucket = parse_duration(args.bucket) if args.bucket else None
    if args.context_tokens < 1:
        raise ValueError("--context-tokens must be at least 1")
    if args.keep is not None and args.keep < 1:
        raise ValueError("--keep must be at least 1")
    window_at = _window_parser(args.since, args.until)
    window = window_at(datetime.now(UTC))  # bad --since/--until fail now, not at the first scheduled run

    def once(when: datetime) -> int:
        # on a schedule, relative windows end at the scheduled time, so consecutive reports neither overlap nor miss
        return _run_once(args, formats, bucket, window_at(when) if args.every else window, scheduled=bool(args.every))

    return run_as_scheduled(args, once, log, "report")


def _run_once(args: argparse.Namespace, formats: tuple[str, ...], bucket: timedelta | None, window: Window,
              scheduled: bool) -> int:
    generated = datetime.now(UTC)
    root = data_root(args.data)
    files = frozenset() if args.raw else window_files(root, window.since, window.until)
    stored_rollups = not args.raw and _update_rollups(root, window)  # before connect()
    con = connect(args.data, window.since, window.until)  # the window's files only
    try:
        data = collect(con, window, bucket=bucket, context_tokens=args.context_tokens, stored_rollups=stored_rollups,
                       requests=args.requests)
        if stored_rollups and window_files(root, window.since, window.until) != files:
            # A data file came or went while the rollups were read: it may have no rollup yet.
            log.info("data files changed during the report; reading the raw rows instead")
            data = collect(con, window, bucket=bucket, context_tokens=args.context_tokens, requests=args.requests)
    finally:
        con.close()
    if data.empty and not scheduled:
        print(f"specmetrics report: no request-steps from {window.describe()} in {args.data}: nothing to report",
              file=sys.stderr)
        return 1
    written = write_report(data, args.out, formats, generated)
    if args.keep is not None:
        for path in prune_reports(args.out, args.keep):
            log.info("removed old report file %s", path)
    if data.empty:
        log.warning("no request-steps from %s; wrote an empty report", window.describe())
    print(f"report for {window.describe()} ({data.request_steps:,} request-steps): "
          + ", ".join(str(p) for p in written), flush=True)
    return 0


def _update_rollups(data: Path | S3Location, window: Window) -> bool:
    """Build the rollups the window's days lack; whether the rollups then cover the window."""
    progress = Progress("rollup", unit="files")
    try:
        if build_missing(data, since=window.since, until=window.until, progress=progress.update):
            progress.finish()
    except OSError as exc:  # a read-only table: the rollups that are there may still cover the window
        log.warning("could not write rollups under %s (%s); reading raw rows where they are missing", data, exc)
    return rollups_cover(data, window.since, window.until)


def _window_parser(since: str | None, until: str | None) -> Callable[[datetime], Window]:
    """A function of the run time giving the window (relative bounds move with each run)."""
    def bound(text: str | None, now: datetime) -> datetime | None:
        if text is None:
            return None
        try:
            return (now - parse_duration(text)).replace(tzinfo=None)
        except ValueError:
            pass
        try:
            t = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not a time or a duration: {text!r} (e.g. 2026-12-01T00:00, 24h)") from None
        return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t

    def window_at(now: datetime) -> Window:
        window = Window(bound(since, now), bound(until, now))
        if window.since and window.until and window.since >= window.until:
            raise ValueError(f"--since ({window.since}) must be before --until ({window.until})")
        return window

    return window_at
