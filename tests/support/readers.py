"""What readers make of an output folder, to compare two folders (a tree and a table, a tree before
and after its conversion): per-engine counts and acceptance, and the Markdown report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from specmetrics.cli import main
from specmetrics.queries import connect, run_query

NUMBERS = ("SELECT engine_id, count(*) AS rows, sum(accepted) AS accepted FROM request_steps GROUP BY engine_id "
           "ORDER BY engine_id")
ACCEPTANCE = "SELECT * FROM acceptance ORDER BY engine_id"


def numbers(data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows and accepted tokens per engine, and the view ``acceptance``."""
    con = connect(data)
    try:
        return run_query(con, NUMBERS).to_pylist(), run_query(con, ACCEPTANCE).to_pylist()
    finally:
        con.close()


def report(data: Path, out: Path) -> str:
    """The Markdown report of all of ``data``, without the time it was made."""
    assert main(["report", "--data", str(data), "--out", str(out), "--format", "md"]) == 0
    text = next(out.glob("*.md")).read_text()
    return re.sub(r"report-\d{8}T\d{6}Z|Generated .* UTC", "", text)
