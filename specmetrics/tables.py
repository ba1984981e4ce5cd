"""Rendering Arrow tables for people (aligned text) and tools (CSV, JSON)."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import date, datetime
from typing import Any

import pyarrow as pa

FORMATS = ("table", "csv", "json")


def render(table: pa.Table, fmt: str) -> str:
    if fmt == "csv":
        return _csv(table)
    if fmt == "json":
        return json.dumps(table.to_pylist(), default=_json_default, indent=1)
    if fmt == "table":
        return text_table(table.column_names, [list(r.values()) for r in table.to_pylist()])
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def text_table(headers: list[str], rows: list[list[Any]]) -> str:
    """An aligned plain-text table; numbers right-aligned, floats with 4 decimals."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) for i in range(len(headers))]

    def line(values: list[str]) -> str:
        cells = (v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))
        return "  ".join(cells).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def _csv(table: pa.Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow(["" if v is None else v for v in row.values()])
    return buffer.getvalue().rstrip("\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
