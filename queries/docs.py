"""docs/views.md, generated from the header comments of the view files, so the reference cannot
drift from the SQL: ``python -m specmetrics.queries.docs > docs/views.md`` (a test checks it is current).

A header is the comment block before the first statement of a file: a first line
``-- name: summary``, paragraphs, an ``-- Example:`` query and a ``-- Columns:`` list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources

from specmetrics.queries.catalog import sql_files

_COLUMN = re.compile(r"^ {2}(\S.*?)\s{2,}(\S.*)$")
_CONTINUED = re.compile(r"^\s{4,}(\S.*)$")
INTRO = """# Views and table macros

Generated from the SQL files in `queries/sql/` by `python -m specmetrics.queries.docs`; do not edit by hand.

`specmetrics sql --data DIR` (one query, or an interactive session), `queries.connect(DIR)`
and the file written by `specmetrics db export FILE.duckdb --data DIR` all hold these views.
Layers: **definitions** are the scalar macros every view, the report and the rollups use (what a
draft is, the draft counts, the time window), **staging** types the stored rows, **rollup** is the
stored per-file rollup, **intermediate** aggregates the rows once, **metrics** are what people
read, **report** the scans of `specmetrics report`. Every metric is grouped by
`engine_id, model, method, num_spec_tokens`; the time dimension comes from the
`*_between(t0, t1)` macro of each view (`t0 <= event_time < t1`, UTC, `NULL` leaves an end
open; bind them: `FROM acceptance_between(?, ?)`) and from `acceptance_timeline`.
Definitions: [docs/design.md](design.md#metric-definitions) and [docs/queries.md](queries.md).
"""


@dataclass
class ViewDoc:
    """One file's header, parsed."""

    layer: str
    name: str
    summary: str
    text: list[str] = field(default_factory=list)
    example: list[str] = field(default_factory=list)
    columns: list[tuple[str, str]] = field(default_factory=list)


def parse(layer: str, sql: str) -> ViewDoc:
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[3:] if line.startswith("-- ") else line[2:])
    name, _, summary = lines[0].partition(": ")
    doc = ViewDoc(layer, name, summary)
    section = "text"
    for line in lines[1:]:
        if line in ("Example:", "Columns:"):
            section = line[:-1].lower()
        elif section == "text":
            doc.text.append(line)
        elif section == "example" and line.strip():
            doc.example.append(line.strip())
        elif section == "columns" and (match := _COLUMN.match(line)):
            doc.columns.append((match.group(1), match.group(2)))
        elif section == "columns" and doc.columns and (match := _CONTINUED.match(line)):
            doc.columns[-1] = (doc.columns[-1][0], f"{doc.columns[-1][1]} {match.group(1)}")
        elif section == "columns" and line.strip():
            doc.text.append(line.strip())  # a note after the column list (e.g. the _between macro)
    return doc


def documents() -> list[ViewDoc]:
    root = resources.files("specmetrics.queries") / "sql"
    return [parse(name.split("/")[0], (root / name).read_text(encoding="utf-8")) for name in sql_files()]


def render() -> str:
    out = [INTRO]
    for doc in documents():
        out += [f"## `{doc.name}` ({doc.layer})", "", doc.summary[:1].upper() + doc.summary[1:], ""]
        paragraphs = " ".join(line.strip() if line.strip() else "\n\n" for line in doc.text)
        out += [re.sub(r" *\n\n *", "\n\n", paragraphs).strip(), ""] if paragraphs.strip() else []
        out += ["| column | meaning |", "|---|---|"]
        out += [f"| `{columns}` | {_cell(meaning)} |" for columns, meaning in doc.columns]
        out += ["", "```sql", *doc.example, "```", ""]
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    print(render(), end="")
