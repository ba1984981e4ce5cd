"""``specmetrics rollup``: write the rollups the stored data lacks (or all of them again)."""

from __future__ import annotations

import argparse
from typing import Any

from specmetrics.commands import DATA_HELP
from specmetrics.progress import Progress
from specmetrics.queries.catalog import rollup_schema
from specmetrics.queries.rollup import build_missing
from specmetrics.storage.location import data_root
from specmetrics.storage.readable import select_files


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rollup", help="Write the per-file rollups reports read instead of raw rows (each report builds those of "
                       "its window; this does the whole table, or rewrites all with --rebuild).")
    parser.add_argument("--data", required=True, help=DATA_HELP)
    parser.add_argument("--rebuild", action="store_true", help="Recompute every rollup, not only missing ones.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = data_root(args.data)
    select_files(root, rollup_schema=rollup_schema()).warn()
    progress = Progress("rollup", unit="files")
    written = build_missing(root, rebuild=args.rebuild, progress=progress.update)
    if written:
        progress.finish()
    print(f"wrote {len(written)} rollup(s) under {args.data}")
    return 0
