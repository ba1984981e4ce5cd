"""``specmetrics db export FILE``: the views over a Parquet tree as a DuckDB database file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from queries.export import export_database


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("db", help="DuckDB database files with the views, for other tools.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser(
        "export", help="Write FILE.duckdb with every view and macro over the Parquet tree (no data is copied).")
    export.add_argument("file", type=Path, help="The DuckDB file to write, e.g. specmetrics.duckdb.")
    export.add_argument("--data", required=True, type=Path, help="The Parquet tree written by 'specmetrics ingest'.")
    export.add_argument("--force", action="store_true", help="Replace FILE if it exists.")
    export.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    path = export_database(args.data, args.file, force=args.force)
    print(f"wrote {path}: the views over {args.data.resolve()}; open it read-only, e.g. "
          f"duckdb -readonly {path} -c 'FROM acceptance_diff'")
    return 0
