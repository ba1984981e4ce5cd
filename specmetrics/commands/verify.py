"""``specmetrics verify``: offset gaps and overlaps per partition, offsets recorded as lost,
duplicate event ids, rollups equal to the raw rows (missing rollups are only counted: reports
build them), files readers leave out, data files no commit names, records set aside."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from specmetrics.commands import DATA_HELP
from specmetrics.progress import Progress
from specmetrics.queries.verify import VerifyReport, verify_table
from specmetrics.storage.damage import StoreDamaged
from specmetrics.storage.layout import DEAD_LETTER_DIR
from specmetrics.storage.location import data_root
from specmetrics.tables import text_table


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify", help="Check what 'specmetrics ingest' stored: offset gaps and overlaps per partition, offsets "
                       "the ingester "
                       "recorded as lost (--accept-loss), duplicate event ids, rows counted twice, rollups not equal "
                       "to the raw rows, files readers leave out, commits missing (exit "
                       "code 1 when any), data files whose footer or a page does not decode (exit code 4); records "
                       "set aside as dead letters (exit code 3 when it is "
                       "otherwise clean); counts data files without a rollup yet.")
    parser.add_argument("--data", required=True, help=DATA_HELP)
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    parser.set_defaults(run=run)


#: Exit codes: the table is clean; it is not (data missing, twice, lost or left out); it is clean but
#: records were set aside as dead letters (their bytes are kept, their rows are in no data file); a
#: data file is damaged (as every command that stops on a damaged file).
CLEAN, NOT_CLEAN, SET_ASIDE, DAMAGED = 0, 1, 3, StoreDamaged.exit_code


def exit_code(report: VerifyReport) -> int:
    if report.damaged:
        return DAMAGED
    if not report.clean:
        return NOT_CLEAN
    return SET_ASIDE if report.set_aside else CLEAN


def run(args: argparse.Namespace) -> int:
    shown: dict[str, Progress] = {}

    def progress(step: str, done: int, total: int) -> None:
        shown.setdefault(step, Progress(f"verify {step}", unit="files")).update(done, total)

    report = verify_table(data_root(args.data), progress=progress)
    if not report.partitions and not report.foreign:
        print(f"nothing to verify: no ingested files under {args.data}")
        return NOT_CLEAN
    if args.json:
        print(json.dumps({**asdict(report), "clean": report.clean}, indent=1))
        return exit_code(report)
    print(text_table(
        ["source", "partition", "first offset", "last offset", "flushes", "gaps", "overlaps"],
        [[p.source, p.partition, p.first, p.last, p.flushes, len(p.gaps), len(p.overlaps)] for p in report.partitions],
    ))
    for p in report.partitions:
        for start, end in p.gaps:
            print(f"gap: {p.source} partition {p.partition} offsets {start}-{end} are missing")
        for start, end in p.overlaps:
            print(f"overlap: {p.source} partition {p.partition} offsets {start}-{end} are stored twice")
    for loss in report.lost:
        print(f"lost: {loss.source} partition {loss.partition} offsets {loss.first}-{loss.last}: {loss.reason}")
    print(f"duplicate event ids: {report.duplicate_events}")
    for event_id, copies in report.duplicate_examples:
        print(f"  {event_id}: {copies} copies")
    if report.rows_twice:
        print(f"rows counted twice: {report.rows_twice:,} (the same rows of one offset in several data files of the "
              "table: readers count them more than once)")
        for event_id, request_id, copies in report.rows_twice_examples:
            print(f"  event {event_id} request {request_id}: {copies} copies")
    rollups = report.rollups
    print(f"data files without a rollup yet: {len(rollups.missing)} (the next report or 'specmetrics rollup' "
          "builds them)")
    for file in rollups.unequal:
        print(f"rollup not equal to its data file's rows: {file}")
    if rollups.unequal:
        print(f"  'specmetrics rollup --data {args.data} --rebuild' rewrites every rollup from the raw rows")
    for left_out in report.left_out:
        print(f"left out by readers: {left_out.path}: {left_out.reason}")
    for source, partition, position, end in report.log_ahead:
        print(f"log ahead of the data: {source} partition {partition}: the table's log says offsets up to "
              f"{position - 1} are stored, its data files end at offset {end - 1} (restored to an older version?); "
              f"the next ingest reads offsets {end}-{position - 1} again")
    for damaged in report.damaged:
        print(f"damaged: {damaged.path}: {damaged.reason}; its rows are not checked (restore the file from a copy, "
              "or take it out of the table)")
    for source, partition, first, last in report.commit_missing:
        print(f"commit missing: {source} partition {partition} offsets {first}-{last}: their data files are there, "
              "but no commit of the table's log names them, so readers do not read them; the next ingest reads "
              "those offsets again from the source")
    if report.foreign:
        print(f"files another application wrote: {len(report.foreign):,} of the table's data files carry no offsets "
              f"in their names (another engine's OPTIMIZE writes such: Spark's, delta-rs's; {report.foreign[0]}, "
              "...): their rows are read and checked for copies, but which offsets they hold cannot be checked, so "
              "the table cannot be called clean while they are in it; 'specmetrics table optimize' writes their rows "
              "again under names that carry the offsets")
    for path in report.uncommitted:
        print(f"not in the table's log (never read): {path}")
    for group in report.set_aside:
        print(f"set aside: {group.source} partition {group.partition}: {group.records:,} record(s), offsets "
              f"{group.first}-{group.last}: {group.reason}")
    records = sum(group.records for group in report.set_aside)
    if not report.clean:
        print("NOT clean")
    elif records:
        print(f"clean, but {records:,} record(s) set aside as dead letters (their bytes are in "
              f"{args.data.rstrip('/')}/{DEAD_LETTER_DIR})")
    else:
        print("clean")
    return exit_code(report)
