"""render and text_table: query results as aligned text, CSV and JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from specmetrics.tables import render, text_table


def test_text_table_aligns_numbers_right_and_text_left() -> None:
    assert text_table(["engine", "rate", "n"], [["a/dp0", 0.5, 12], ["long-name/dp1", None, 3]]).splitlines() == [
        "engine           rate   n",
        "-------------  ------  --",
        "a/dp0          0.5000  12",
        "long-name/dp1    NULL   3",
        "(2 rows)",
    ]
    assert text_table(["x"], [[float("nan")]]).splitlines()[2:] == ["NaN", "(1 row)"]


def test_csv_and_json_keep_nulls_and_times() -> None:
    table = pa.table({"t": [datetime(2025, 1, 1, 10, tzinfo=UTC), None], "v": ["a,b", None]})
    assert render(table, "csv") == 't,v\n2025-01-01 10:00:00+00:00,"a,b"\n,'
    assert json.loads(render(table, "json")) == [{"t": "2025-01-01T10:00:00+00:00", "v": "a,b"},
                                                 {"t": None, "v": None}]
    with pytest.raises(ValueError, match="unknown format 'yaml'; choose one of table, csv, json"):
        render(table, "yaml")
