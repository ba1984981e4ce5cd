"""count_batch: the live counters' arithmetic, against a count by hand and against the views."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.metrics.counts import count_batch, kind_and_reason
from ingest.metrics.exposition import group_families
from ingest.metrics.live import PipelineHealth, Snapshot
from schemas.arrow import REQUEST_STEP_SCHEMA
from tests.support.metrics import VIEW_SERIES, Samples, view_series
from tests.support.outcomes import OutcomeRows, outcome


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=REQUEST_STEP_SCHEMA)


def test_one_group_counted_by_hand() -> None:
    rows = OutcomeRows()
    batch = table([
        rows.drafted(3, 2), rows.drafted(3, 3),  # corrected and vLLM drafts
        rows.skipped(3, accepted=1),  # placeholders: a vLLM draft only; 3 wasted slots
        rows.grammar_async(1, 2, 1),  # a corrected draft of 1 token; 2 -1 pads
        rows.grammar_async(0, 3, 0),  # all invalid: a vLLM draft only
        rows.k_zero("no_proposal"),
        rows.row(kind="k_zero", k_zero_reason="verify_budget", k_sched=2, k_valid=2, accepted=0),
    ])
    [(key, counts)] = count_batch(batch).items()
    assert key == ("tiny-llama", "a/dp0", "draft_model", 3)
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == (3, 7, 6)
    assert (counts.vllm_drafts, counts.vllm_draft_tokens, counts.vllm_accepted_tokens) == (6, 12, 7)
    assert counts.accepted_per_pos == [3, 2, 1]
    assert counts.reached_per_pos == [3, 2, 2]
    assert counts.vllm_accepted_per_pos == [4, 2, 1]
    assert (counts.verified_slots, counts.placeholder_slots, counts.pad_slots) == (15, 3, 5)
    assert {kind_and_reason(code): n for code, n in counts.request_steps.items()} == {
        ("drafted", ""): 2, ("skipped_for_length", ""): 1, ("grammar_invalid", ""): 2,
        ("k_zero", "no_proposal"): 1, ("k_zero", "verify_budget"): 1}


def samples_of(batch: pa.Table) -> Samples:
    snapshot = Snapshot(count_batch(batch), {}, PipelineHealth())
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in group_families(snapshot) for sample in family.samples if sample.name in VIEW_SERIES}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(outcome(), min_size=1, max_size=40))
def test_every_counter_equals_the_views(drawn: list[dict[str, Any]]) -> None:
    rows = OutcomeRows()
    built = [rows.row(**d) for d in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        expected = view_series(rows.write_tree(Path(tmp) / "data", built))
    assert samples_of(table(built)) == expected
