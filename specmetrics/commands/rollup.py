"""``specmetrics rollup``: write the rollups a Parquet tree lacks (or all of them again)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from queries.rollup import build_missing
from specmetrics.progress import Progress
from storage.tree_files import select_files


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rollup", help="Write the per-file rollups reports read instead of raw rows (each report builds those of "
                       "its window; this does a whole tree, or rewrites all with --rebuild).")
    parser.add_argument("--data", required=True, type=Path, help="The tree written by 'specmetrics ingest'.")
    parser.add_argument("--rebuild", action="store_true", help="Recompute every rollup, not only missing ones.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.data.is_dir():
        raise FileNotFoundError(f"{args.data} is not a directory")
    select_files(args.data).warn()
    progress = Progress("rollup", unit="files")
    written = build_missing(args.data, rebuild=args.rebuild, progress=progress.update)
    if written:
        progress.finish()
    print(f"wrote {len(written)} rollup(s) under {args.data}")
    return 0
