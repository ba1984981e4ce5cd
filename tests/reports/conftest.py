"""Fixtures for the report tests: the query tests' rows (:class:`OutcomeRows`) and a small timed tree
(from ``tests.support.reports.T``): two engines, drafts, skips, grammar and K = 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.outcomes import OutcomeRows
from tests.support.reports import T


@pytest.fixture(scope="session")
def outcomes() -> OutcomeRows:
    return OutcomeRows()


@pytest.fixture
def report_tree(tmp_path: Path, outcomes: Any) -> Path:
    o = outcomes
    b: dict[str, Any] = {"engine_instance": "b", "dp_rank": 1}
    rows = [
        o.drafted(3, 3, event_time=T.replace(minute=0), batch_max_seq_len=100),
        o.drafted(3, 1, event_time=T.replace(minute=1), batch_max_seq_len=300),
        o.skipped(3, event_time=T.replace(minute=2), batch_max_seq_len=700),
        o.skipped(3, event_time=T.replace(minute=2, second=30), batch_max_seq_len=900),
        o.grammar_async(0, 3, 0, event_time=T.replace(minute=3), batch_max_seq_len=120),
        o.k_zero("no_proposal", event_time=T.replace(minute=3), **b),
        o.k_zero("no_proposal", event_time=T.replace(minute=4), **b),
        o.k_zero("length_trim", event_time=T.replace(minute=4), **b),
        o.drafted(2, 2, event_time=T.replace(minute=5), **b),
    ]
    return Path(outcomes.write_table(tmp_path / "data", rows))
