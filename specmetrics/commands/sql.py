"""``specmetrics sql``: one read-only query against the views, or an interactive session."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from specmetrics.commands import DATA_HELP
from specmetrics.queries import connect, run_query
from specmetrics.shell import SqlShell, with_history
from specmetrics.tables import FORMATS, render

STATE_HOME = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
DEFAULT_HISTORY = STATE_HOME / "specmetrics" / "sql_history"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sql", help="Run a read-only SQL query against the views over the stored steps; without one, an interactive "
                    "session (statements end with ';', .views lists the views).")
    parser.add_argument("--data", required=True, help=DATA_HELP)
    parser.add_argument("--format", choices=FORMATS, default="table", help="Output format (default: table).")
    parser.add_argument("--param", action="append", default=[], metavar="VALUE",
                        help="A value bound to the next '?' in the query (repeatable; never pasted into SQL).")
    parser.add_argument("--history", type=Path, default=DEFAULT_HISTORY,
                        help=f"History file of the interactive session (default: {DEFAULT_HISTORY}).")
    parser.add_argument("query", nargs="?", default=None,
                        help='e.g. "SELECT * FROM acceptance"; omit it for an interactive session')
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.query is None and args.param:
        raise ValueError("--param needs a query")
    con = connect(args.data)
    try:
        if args.query is not None:
            print(render(run_query(con, args.query, args.param or None), args.format))
            return 0
        save_history = with_history(args.history)
        try:
            SqlShell(con, args.format, read=input if sys.stdin.isatty() else _read_quietly).run()
        finally:
            save_history()
    finally:
        con.close()
    return 0


def _read_quietly(prompt: str) -> str:
    """Input from a pipe or file: no prompts in the output."""
    return input()
