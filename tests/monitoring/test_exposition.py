"""The families a scrape shows: the counters of a batch by hand, and every counter equal to the
views over the same rows written as a tree."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.ingest.observer import ValidatedSteps
from specmetrics.monitoring.exposition import LiveCollector, group_families
from specmetrics.monitoring.histogram import count_batch
from specmetrics.monitoring.live import LiveMetrics, PipelineHealth, Snapshot
from specmetrics.queries.live import LiveTotals
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from tests.support.metrics import VIEW_SERIES, Samples, view_series
from tests.support.outcomes import OutcomeRows, outcome


@pytest.fixture(scope="module")
def totals() -> Iterator[LiveTotals]:
    live_totals = LiveTotals()
    yield live_totals
    live_totals.close()


def samples_of(totals: LiveTotals, rows: list[dict[str, Any]]) -> Samples:
    batch = pa.Table.from_pylist(rows, schema=REQUEST_STEP_SCHEMA)
    counts = count_batch(batch)
    snapshot = Snapshot(counts.shapes, counts.last_event_us, {}, {}, PipelineHealth())
    families = group_families(totals.totals(snapshot.histogram()), snapshot)
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in families for sample in family.samples}


def test_one_group_counted_by_hand(totals: LiveTotals) -> None:
    rows = OutcomeRows()
    samples = samples_of(totals, [
        rows.drafted(3, 2), rows.drafted(3, 3),  # corrected and vLLM drafts
        rows.skipped(3, accepted=1),  # placeholders: a vLLM draft only; 3 wasted slots
        rows.grammar_async(1, 2, 1),  # a corrected draft of 1 token; 2 -1 pads
        rows.grammar_async(0, 3, 0),  # all invalid: a vLLM draft only
        rows.k_zero("no_proposal"),
        rows.row(kind="k_zero", k_zero_reason="verify_budget", k_sched=2, k_valid=2, accepted=0),
    ])
    group = (("engine", "a/dp0"), ("method", "draft_model"), ("model_name", "tiny-llama"), ("num_spec_tokens", "3"))

    def value(name: str, **labels: str) -> float:
        return samples[(f"specmetrics_{name}", tuple(sorted((*group, *labels.items()))))]

    assert [value(f"spec_decode_{n}_total") for n in ("drafts", "draft_tokens", "accepted_tokens")] == [3, 7, 6]
    assert [value(f"vllm_spec_decode_{n}_total") for n in ("drafts", "draft_tokens", "accepted_tokens")] == [6, 12, 7]
    for name, expected in (("spec_decode_accepted_tokens_per_pos_total", [3, 2, 1]),
                           ("spec_decode_reached_per_pos_total", [3, 2, 2]),
                           ("vllm_spec_decode_accepted_tokens_per_pos_total", [4, 2, 1])):
        assert [value(name, position=str(i)) for i in range(3)] == expected, name
    assert value("verified_draft_slots_total") == 15
    assert (value("wasted_draft_slots_total", cause="placeholder"), value("wasted_draft_slots_total", cause="pad")) == (
        3, 5)
    assert value("emitted_tokens_total") == 3 + 4 + 2 + 2 + 1 + 0 + 0
    steps = {dict(labels)["kind"] + "/" + dict(labels)["k_zero_reason"]: n for (name, labels), n in samples.items()
             if name == "specmetrics_request_steps_total"}
    assert steps == {"drafted/": 2, "skipped_for_length/": 1, "grammar_invalid/": 2, "k_zero/no_proposal": 1,
                     "k_zero/verify_budget": 1}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(outcome(), min_size=1, max_size=40))
def test_every_counter_equals_the_views(totals: LiveTotals, drawn: list[dict[str, Any]]) -> None:
    rows = OutcomeRows()
    built = [rows.row(**d) for d in drawn]
    with tempfile.TemporaryDirectory() as tmp:
        expected = view_series(rows.write_table(Path(tmp) / "data", built))
    assert {key: value for key, value in samples_of(totals, built).items() if key[0] in VIEW_SERIES} == expected


def test_a_failing_computation_or_a_closed_collector_still_shows_the_pipelines_health(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    rows = OutcomeRows()
    live = LiveMetrics()
    batch = pa.Table.from_pylist([rows.drafted(3, 2)], schema=REQUEST_STEP_SCHEMA).to_batches()[0]
    live.validated("log", ValidatedSteps(0, batch, [], np.zeros(0, dtype=np.int64), [5], []))
    collector = LiveCollector(live)
    names = {family.name for family in collector.collect()}
    assert {"specmetrics_spec_decode_drafts", "specmetrics_ingest_dead_letters"} <= names

    def fail(histogram: pa.Table) -> None:
        raise RuntimeError("the SQL broke")

    monkeypatch.setattr(collector._totals, "totals", fail)
    health = {"specmetrics_ingest_steps", "specmetrics_ingest_request_steps", "specmetrics_ingest_dead_letters",
              "specmetrics_ingest_duplicate_steps",
              "specmetrics_ingest_lost_offsets", "specmetrics_ingest_consumer_lag_records",
              "specmetrics_ingest_stalled_seconds"}
    assert {family.name for family in collector.collect()} == health
    assert "the live totals could not be computed" in caplog.text
    collector.close()
    assert {family.name for family in collector.collect()} == health
    collector.close()  # twice is fine
