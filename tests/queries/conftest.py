"""Fixtures for the query tests: the row builders and fresh trees to connect to."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from specmetrics.queries import connect
from tests.support.outcomes import OutcomeRows, Row


@pytest.fixture(scope="session")
def outcomes() -> OutcomeRows:
    return OutcomeRows()


@pytest.fixture
def connect_rows(tmp_path: Path, outcomes: OutcomeRows) -> Iterator[Any]:
    """``connect_rows(rows)``: write ``rows`` into a fresh tree and connect to it."""
    opened: list[duckdb.DuckDBPyConnection] = []

    def make(rows: Iterable[Row], name: str = "data") -> duckdb.DuckDBPyConnection:
        con = connect(outcomes.write_table(tmp_path / name, rows))
        opened.append(con)
        return con

    yield make
    for con in opened:
        con.close()
