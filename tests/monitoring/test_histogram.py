"""count_batch: request-steps of a batch per group and outcome shape, and each group's latest
event, by hand and against a count of the rows in Python, along each of the three ways of finding distinct rows."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.monitoring import histogram
from specmetrics.monitoring.histogram import SHAPE_COLUMNS, count_batch
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from tests.support.outcomes import OutcomeRows, outcome


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=REQUEST_STEP_SCHEMA)


def by_python(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[int, int]]:
    steps = Counter(tuple(row[column] for column in SHAPE_COLUMNS) for row in rows)
    emitted: Counter[tuple[Any, ...]] = Counter()
    for row in rows:
        emitted[tuple(row[column] for column in SHAPE_COLUMNS)] += row["emitted"]
    return {shape: (n, emitted[shape]) for shape, n in steps.items()}


def test_shapes_counted_by_hand() -> None:
    rows = OutcomeRows()
    batch = table([
        rows.drafted(3, 2), rows.drafted(3, 2), rows.drafted(3, 3),
        rows.skipped(3), rows.k_zero("no_proposal"), rows.k_zero("no_proposal"),
        rows.drafted(3, 2, engine_instance="b"),
    ])
    a, b = ("a/dp0", "tiny-llama", "draft_model", 3), ("b/dp0", "tiny-llama", "draft_model", 3)
    assert count_batch(batch).shapes == {
        (*a, "drafted", None, 3, 3, 0, 2): (2, 6),
        (*a, "drafted", None, 3, 3, 0, 3): (1, 4),
        (*a, "skipped_for_length", None, 3, 3, 0, 0): (1, 1),
        (*a, "k_zero", "no_proposal", 0, 0, 0, 0): (2, 0),
        (*b, "drafted", None, 3, 3, 0, 2): (1, 3),
    }


def test_the_latest_event_of_each_group() -> None:
    rows = OutcomeRows()
    batch = table([rows.drafted(3, 1, event_time=datetime(2025, 1, 1, 10, 0, 1)),
                   rows.drafted(3, 1, event_time=datetime(2025, 1, 1, 10, 0, 3)),
                   rows.drafted(3, 1, event_time=datetime(2025, 1, 1, 10, 0, 2), num_spec_tokens=4)])
    start = int(datetime(2025, 1, 1, 10, tzinfo=UTC).timestamp() * 1e6)  # stored naive times are UTC
    assert count_batch(batch).last_event_us == {("a/dp0", "tiny-llama", "draft_model", 3): start + 3_000_000,
                                    ("a/dp0", "tiny-llama", "draft_model", 4): start + 2_000_000}
    one_group = table([rows.drafted(3, 1, event_time=datetime(2025, 1, 1, 10, 0, 5))])
    assert count_batch(one_group).last_event_us == {("a/dp0", "tiny-llama", "draft_model", 3): start + 5_000_000}
    assert count_batch(table([])).shapes == {} and count_batch(table([])).last_event_us == {}


@pytest.mark.parametrize("dense_bins", [1 << 16, 0], ids=["histogram", "sort"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(outcome(), min_size=1, max_size=60))
def test_every_batch_counted_as_its_rows(drawn: list[dict[str, Any]], dense_bins: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(histogram, "_DENSE_BINS", dense_bins)
    rows = OutcomeRows()
    built = [rows.row(**d) for d in drawn]
    assert count_batch(table(built)).shapes == by_python(built)
    assert sum(n for n, _ in count_batch(table(built)).shapes.values()) == len(built)


def test_columns_too_wide_for_one_code_are_counted_row_by_row() -> None:
    codes = [np.array([2**31 - 1, 0, 2**31 - 1]), np.array([5, 5, 5]), np.array([1, 0, 1])]
    distinct, inverse = histogram._distinct(codes, [2**31, 2**31, 2])
    assert [column.tolist() for column in distinct] == [[0, 2**31 - 1], [5, 5], [0, 1]]
    assert inverse.tolist() == [1, 0, 1]


def test_a_dictionary_that_repeats_a_value_counts_its_rows_once_each() -> None:
    rows = OutcomeRows()
    batch = table([rows.drafted(3, 2, event_time=datetime(2025, 1, 1, 10, 0, second)) for second in range(3)])
    engine = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), pa.array(["a/dp0", "a/dp0"]))
    batch = batch.set_column(batch.schema.get_field_index("engine_id"),
                             pa.field("engine_id", engine.type, nullable=False), engine)
    a = ("a/dp0", "tiny-llama", "draft_model", 3)
    assert count_batch(batch).shapes == {(*a, "drafted", None, 3, 3, 0, 2): (3, 9)}
    assert count_batch(batch).last_event_us == {
        a: int(datetime(2025, 1, 1, 10, 0, 2, tzinfo=UTC).timestamp() * 1e6)}


def test_values_too_wide_for_one_code_are_counted_as_their_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(histogram, "_integers", lambda column: (column.to_numpy(), range(2**31)))
    rows = OutcomeRows()
    built = [rows.drafted(3, 2), rows.drafted(3, 2), rows.k_zero("no_proposal")]
    assert count_batch(table(built)).shapes == by_python(built)
