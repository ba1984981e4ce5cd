"""``specmetrics table convert|optimize|vacuum|checkpoint|maintain``: a tree made a table, and a table's upkeep."""

from __future__ import annotations

import argparse
import logging
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from specmetrics.ingest.convert import convert_tree
from specmetrics.ingest.settings import IngestSettings
from specmetrics.progress import Progress
from specmetrics.queries.rollup import build_missing
from specmetrics.scheduled import add_schedule_arguments, run_as_scheduled
from specmetrics.storage.compaction import compact
from specmetrics.storage.location import data_root
from specmetrics.storage.table import IN_FLIGHT_HOURS, Table, is_table

log = logging.getLogger("specmetrics.table")

#: Files no commit names are removed once they are this old (Delta's own default).
RETENTION_HOURS = 168.0
#: Below this retention, vacuum asks for --force: an ingester's flush is written some time before its commit.
MIN_RETENTION_HOURS = IN_FLIGHT_HOURS
#: Rows of a merged file at most: the ingester's own flush size.
TARGET_ROWS = IngestSettings.model_fields["flush_rows"].default


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("table", help="Delta Lake tables: convert a tree into one, merge small files, "
                                                 "remove the files no commit names, checkpoint the log, or the three "
                                                 "on a schedule (maintain).")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    convert = actions.add_parser(
        "convert", help="Make a tree an older 'specmetrics ingest' wrote a table in place: one commit names the files "
                        "readers take and each source partition's next offset. Stop its ingesters first.")
    optimize = actions.add_parser(
        "optimize", help="Merge runs of small committed files (per hour folder and source partition, offsets "
                         "following each other) into files of up to --target-rows rows, in one commit, and roll up "
                         "the merged files (as a report would); first give files committed without statistics "
                         "(rows, event-time and offset bounds) theirs, from their footers. Ingesters may run "
                         "meanwhile.")
    optimize.add_argument("--target-rows", type=int, default=TARGET_ROWS,
                          help=f"Rows per merged file at most (default {TARGET_ROWS:,}: the ingester's flush).")
    vacuum = actions.add_parser(
        "vacuum", help="Remove the files no commit names (writers killed or refused before their commit, files "
                       "dropped into the folders, files merged by optimize) and their rollups, older than "
                       "--retention-hours.")
    vacuum.add_argument("--retention-hours", type=_hours, default=RETENTION_HOURS,
                        help=f"Keep files changed more recently than this (default {RETENTION_HOURS:g}: a flush "
                             f"being written is never removed; under {MIN_RETENTION_HOURS:g} only with --force).")
    vacuum.add_argument("--force", action="store_true",
                        help=f"Allow a retention under {MIN_RETENTION_HOURS:g} h: a flush an ingester is writing "
                             "now may lose its files before its commit names them (its rows are then gone).")
    vacuum.add_argument("--dry-run", action="store_true", help="List the files, remove nothing.")
    checkpoint = actions.add_parser(
        "checkpoint", help="Checkpoint the log at its latest version, so readers start there; log entries past "
                           "the retention (30 days) are removed.")
    maintain = actions.add_parser(
        "maintain", help="The upkeep of a table ingesters write (the stack's maintenance service): optimize, "
                         "checkpoint and vacuum, in that order; --every repeats it.")
    maintain.add_argument("--target-rows", type=int, default=TARGET_ROWS,
                          help=f"As for optimize (default {TARGET_ROWS:,}).")
    maintain.add_argument("--retention-hours", type=_hours, default=RETENTION_HOURS,
                          help=f"As for vacuum (default {RETENTION_HOURS:g}; at least {MIN_RETENTION_HOURS:g}: "
                               "ingesters write meanwhile).")
    add_schedule_arguments(maintain, "succeeded")
    convert.add_argument("--data", required=True, type=Path, help="The output directory of 'specmetrics ingest'.")
    for action in (optimize, vacuum, checkpoint, maintain):
        action.add_argument("--data", required=True, help="The output directory of 'specmetrics ingest', or "
                                                          "s3://bucket/prefix for a table on S3.")
    parser.set_defaults(run=run)


def _hours(text: str) -> float:
    """An ``argparse`` type: a finite number of hours, 0 or more."""
    try:
        hours = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    if not math.isfinite(hours) or hours < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours of 0 or more")
    return hours


def run(args: argparse.Namespace) -> int:
    if args.action == "convert":
        done = convert_tree(args.data)
        print(f"{args.data} is a table: {done.files:,} data file(s) committed ({done.rowless} without rows, for "
              f"flushes of dead letters only), {done.left_out} file(s) readers leave out not committed")
        for (source, partition), position in sorted(done.positions.items()):
            print(f"  {source} partition {partition}: next offset {position:,}")
        return 0
    if args.action == "maintain":
        return _maintain(args)
    table = _table(args.data)
    if args.action == "optimize":
        _optimize(table, args.target_rows)
    elif args.action == "vacuum":
        if args.retention_hours < MIN_RETENTION_HOURS and not args.force:
            raise ValueError(f"--retention-hours {args.retention_hours:g} is under {MIN_RETENTION_HOURS:g}: it can "
                             "remove the files of a flush an ingester has written and not committed yet, whose rows "
                             "are then gone for good; stop the ingesters first and pass --force")
        _vacuum(table, args.retention_hours, args.dry_run)
    else:
        print(f"checkpointed {args.data} at version {table.checkpoint()}")
    return 0


def _table(data: str) -> Table:
    root = data_root(data)
    if not is_table(root):
        raise ValueError(f"{data} is not a table ('specmetrics table convert' makes a tree one)")
    return Table(root)


def _optimize(table: Table, target_rows: int) -> None:
    footers = Progress("statistics from footers", unit="files")
    if stated := table.add_missing_statistics(footers.update):
        footers.finish()
    merging = Progress("merge", unit="files")
    merged = compact(table, target_rows, progress=merging.update)
    if merged.merged_files:
        merging.finish()
    days = [datetime.fromisoformat(day) for day in merged.days]
    rollups = Progress("rollup", unit="files")
    rolled = build_missing(table.root, since=min(days), until=max(days) + timedelta(days=1),
                           progress=rollups.update) if days else []
    if rolled:
        rollups.finish()
    print(f"merged {merged.merged_files:,} file(s) into {merged.new_files:,} ({merged.rows:,} rows), rolled up "
          f"{len(rolled):,} file(s) of their days; the files merged stay on disk until 'specmetrics table vacuum'"
          + (f"; {stated:,} file(s) committed without statistics have them now" if stated else "")
          + (f"; {merged.named_again:,} file(s) another application wrote (no offsets in their names) written again "
             f"into {merged.named_files:,} named for their rows' offsets" if merged.named_again else "")
          + (f"; {merged.foreign:,} file(s) another application wrote (no offsets in their names) left as they are"
             if merged.foreign else ""), flush=True)


def _vacuum(table: Table, retention_hours: float, dry_run: bool) -> None:
    files = table.vacuum(retention_hours, dry_run)
    verb = "would remove" if dry_run else "removed"
    for relative in files:
        print(f"{verb} {relative}")
    print(f"{verb} {len(files)} file(s) no commit names, older than {retention_hours:g} h", flush=True)


def _maintain(args: argparse.Namespace) -> int:
    """``table maintain``: optimize, checkpoint, vacuum; once, or on the schedule ``--every``."""
    if args.retention_hours < MIN_RETENTION_HOURS:
        raise ValueError(f"--retention-hours {args.retention_hours:g} is under {MIN_RETENTION_HOURS:g}: ingesters "
                         "write meanwhile, and a flush's files are written before its commit names them; stop the "
                         "ingesters and use 'specmetrics table vacuum --force'")

    def once(_when: datetime) -> int:
        table = _table(args.data)
        _optimize(table, args.target_rows)
        print(f"checkpointed {args.data} at version {table.checkpoint()}", flush=True)
        _vacuum(table, args.retention_hours, dry_run=False)
        return 0

    return run_as_scheduled(args, once, log, "table maintain")
