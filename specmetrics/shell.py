"""The interactive mode of ``specmetrics sql``: statements over several lines (run at ``;``),
line editing and a history file when the input is a terminal, and dot commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import duckdb

from specmetrics.queries import QueryRejected, describe_views, run_query
from specmetrics.tables import FORMATS, render, text_table

PROMPT, CONTINUE = "specmetrics> ", "        ...> "
HELP = """Statements end with ';' and may span lines. Connections are read-only.
  .views            the views and table macros, with what they mean
  .format FORMAT    output format: table, csv or json
  .help             this text
  .quit             leave (or Ctrl-D)"""


class SqlShell:
    """Reads statements from ``read`` (``input`` by default) and prints results to stdout."""

    def __init__(self, con: duckdb.DuckDBPyConnection, fmt: str = "table",
                 read: Callable[[str], str] = input) -> None:
        self.con = con
        self.fmt = fmt
        self.read = read

    def run(self) -> None:
        buffer: list[str] = []
        while True:
            try:
                line = self.read(CONTINUE if buffer else PROMPT)
            except EOFError:
                break
            except KeyboardInterrupt:
                print()
                buffer.clear()
                continue
            if not buffer and line.strip().startswith("."):
                if not self.command(line.strip()):
                    break
                continue
            if line.strip():
                buffer.append(line)
            if buffer and buffer[-1].rstrip().endswith(";"):
                self.execute("\n".join(buffer))
                buffer.clear()
        if buffer:
            self.execute("\n".join(buffer))

    def command(self, line: str) -> bool:
        """Run a dot command; False to leave."""
        name, _, arg = line.partition(" ")
        if name in (".quit", ".exit"):
            return False
        if name == ".views":
            print(text_table(["name", "meaning"], [[n, c or ""] for n, c in describe_views(self.con)]))
        elif name == ".format":
            if arg.strip() in FORMATS:
                self.fmt = arg.strip()
            else:
                print(f"unknown format {arg.strip()!r}: choose from {', '.join(FORMATS)}", file=sys.stderr)
        elif name == ".help":
            print(HELP)
        else:
            print(f"unknown command {line!r}\n{HELP}", file=sys.stderr)
        return True

    def execute(self, sql: str) -> None:
        try:
            print(render(run_query(self.con, sql.strip().rstrip(";")), self.fmt))
        except (QueryRejected, duckdb.Error) as exc:
            print(f"error: {exc}", file=sys.stderr)
        except KeyboardInterrupt:  # Ctrl-C stops the query, not the session
            self.con.interrupt()
            print("interrupted", file=sys.stderr)


def with_history(path: Path) -> Callable[[], None]:
    """Load line editing and the history in ``path`` (when stdin is a terminal); returns the
    function that saves the history."""
    if not sys.stdin.isatty():
        return lambda: None
    import readline

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        readline.read_history_file(path)
    readline.set_history_length(10_000)
    return lambda: readline.write_history_file(path)
