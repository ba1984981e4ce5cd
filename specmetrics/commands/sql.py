"""``specmetrics sql``: one read-only query against the views."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from queries import connect, run_query
from specmetrics.tables import FORMATS, render


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("sql", help="Run one read-only SQL query against the views over a Parquet tree.")
    parser.add_argument("--data", required=True, type=Path, help="The Parquet tree written by 'specmetrics ingest'.")
    parser.add_argument("--format", choices=FORMATS, default="table", help="Output format (default: table).")
    parser.add_argument("--param", action="append", default=[], metavar="VALUE",
                        help="A value bound to the next '?' in the query (repeatable; never pasted into SQL).")
    parser.add_argument("query", help='e.g. "SELECT * FROM acceptance"')
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    con = connect(args.data)
    try:
        print(render(run_query(con, args.query, args.param or None), args.format))
    finally:
        con.close()
    return 0
