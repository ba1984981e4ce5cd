"""LiveTotals: the views' SQL over a live histogram, per group."""

from __future__ import annotations

import pyarrow as pa
import pytest

from specmetrics.queries.live import LIVE_HISTOGRAM_SCHEMA, GroupTotals, LiveTotals, RequestStepCount


def histogram(*rows: tuple[object, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(LIVE_HISTOGRAM_SCHEMA.names, row, strict=True)) for row in rows],
                                schema=LIVE_HISTOGRAM_SCHEMA)


def test_totals_per_group_from_the_views() -> None:
    totals = LiveTotals()
    try:
        assert totals.totals(LIVE_HISTOGRAM_SCHEMA.empty_table()) == []
        got = totals.totals(histogram(
            ("a/dp0", "m", "draft_model", 2, "drafted", None, 2, 2, 0, 1, 10, 20),  # 10 drafts, 1 accepted each
            ("a/dp0", "m", "draft_model", 2, "skipped_for_length", None, 2, 2, 0, 0, 5, 5),
            ("a/dp0", "m", "draft_model", 2, "k_zero", "no_proposal", 0, 0, 0, 0, 3, 3),
            ("b/dp0", "m", "ngram", 0, "k_zero", "schedule", 0, 0, 0, 0, 1, 1),  # K = 0: no position
        ))
    finally:
        totals.close()
    assert got == [
        GroupTotals("a/dp0", "m", "draft_model", 2, 10, 20, 10, 15, 30, 10, [10, 0], [10, 10], [10, 0],
                    [RequestStepCount("drafted", None, 10), RequestStepCount("k_zero", "no_proposal", 3),
                     RequestStepCount("skipped_for_length", None, 5)], 28, 30, 10, 0),
        GroupTotals("b/dp0", "m", "ngram", 0, 0, 0, 0, 0, 0, 0, [], [], [],
                    [RequestStepCount("k_zero", "schedule", 1)], 1, 0, 0, 0),
    ]


def test_a_closed_connection_is_an_error_not_a_wrong_number() -> None:
    totals = LiveTotals()
    totals.close()
    with pytest.raises(Exception, match="closed"):
        totals.totals(LIVE_HISTOGRAM_SCHEMA.empty_table())
