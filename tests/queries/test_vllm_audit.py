"""The audit (schema 1.6): vLLM's own counters of each step beside the events' vLLM-compatible ones,
through the wire, ingest and the views; files written before 1.6 read null and are counted apart."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.queries import connect, run_query
from specmetrics.queries.rollup import build_missing
from specmetrics.reports import Window, collect
from specmetrics.reports.render import html, markdown
from specmetrics.schemas.arrow import schema_before
from specmetrics.schemas.events import StepEvent, VllmCounts
from specmetrics.schemas.wire import InvalidRecord, decode_step, step_event_to_wire
from specmetrics.storage.layout import FileName
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event, step_events
from tests.support.ingest import ingest_once
from tests.support.outcomes import commit_files

#: vLLM's counts of tests.support.events.step_event's default outcomes (drafted 3/2, skipped 3 slots,
#: grammar_invalid 3 slots 1 valid 1 accepted, k_zero): three drafts, 3 + 3 + 1 tokens, 3 accepted.
EQUAL = VllmCounts(num_drafts=3, num_draft_tokens=7, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 1, 0])


def audit(tmp_path: Path, counts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    log = tmp_path / "log"
    writer = LocalLogWriter(log)
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", step_index=i, event_time=T0 + timedelta(seconds=i),
                                                 **fields)) for i, fields in enumerate(counts)])
    writer.close()
    ingest_once(log, tmp_path / "data")
    con = connect(tmp_path / "data")
    try:
        return (run_query(con, "SELECT * EXCLUDE (engine_id, vllm_version, model, method) FROM vllm_audit").to_pylist(),
                run_query(con, "SELECT step_index, differs FROM vllm_audit_steps").to_pylist())
    finally:
        con.close()


def test_equal_steps_pass_and_a_differing_one_is_named_with_its_differences(tmp_path: Path) -> None:
    fewer = VllmCounts(num_drafts=2, num_draft_tokens=4, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 0, 0])
    rows, steps = audit(tmp_path, [{"vllm_counts": EQUAL}, {"vllm_counts": EQUAL}, {"vllm_counts": fewer},
                                   {"vllm_counts": EQUAL}, {"vllm_counts_missing": "stats_off"}, {}])
    assert rows == [{"steps_compared": 4, "steps_differing": 1, "first_differing_step": 2, "last_differing_step": 2,
                     "num_drafts_difference": 1, "num_draft_tokens_difference": 3,
                     "num_accepted_tokens_difference": 0, "accepted_per_pos_difference": [0, 1, 0],
                     "steps_without_counts": 2}]
    assert [(row["step_index"], row["differs"]) for row in steps] == [(0, False), (1, False), (2, True), (3, False)]


def test_all_equal_is_zero_differing(tmp_path: Path) -> None:
    rows, _ = audit(tmp_path, [{"vllm_counts": EQUAL}] * 3)
    assert [(r["steps_compared"], r["steps_differing"], r["first_differing_step"]) for r in rows] == [(3, 0, None)]


def test_files_written_before_1_6_read_null_beside_newer_ones(tmp_path: Path) -> None:
    audit(tmp_path, [{"vllm_counts": EQUAL}])
    row = {name: value for name, value in [("schema_version", "1.5"), ("event_id", "old"), ("engine_id", "node-a/dp0"),
                                           ("engine_instance", "node-a"), ("dp_rank", 0), ("model", "tiny-target"),
                                           ("vllm_version", "0.32.0"), ("method", "draft_model"),
                                           ("num_spec_tokens", 3), ("step_index", 100), ("event_time", T0),
                                           ("log_partition", 0), ("log_offset", 50), ("request_id", "r"),
                                           ("kind", "drafted"), ("k_sched", 3), ("k_valid", 3), ("k_invalid", 0),
                                           ("accepted", 1), ("emitted", 2)]}
    folder = tmp_path / "data" / "dt=2026-11-30" / "hour=12"
    pq.write_table(pa.Table.from_pylist([row], schema=schema_before("1.6")),
                   folder / FileName("old", 0, 50, 50).render("parquet"))
    commit_files(tmp_path / "data", [folder / FileName("old", 0, 50, 50).render("parquet")])
    con = connect(tmp_path / "data")
    try:
        got = run_query(con, "SELECT event_id, vllm_num_drafts, vllm_accepted_per_pos, vllm_counts_missing "
                             "FROM request_steps WHERE request_id = 'r' OR event_id = 'old' ORDER BY ALL").to_pylist()
        audited = run_query(con, "SELECT steps_compared, steps_differing, steps_without_counts FROM vllm_audit"
                            ).to_pylist()
    finally:
        con.close()
    assert got == [{"event_id": "old", "vllm_num_drafts": None, "vllm_accepted_per_pos": None,
                    "vllm_counts_missing": None}]
    assert audited == [{"steps_compared": 1, "steps_differing": 0, "steps_without_counts": 1}]


@pytest.mark.parametrize("value", [[1, 2], [1, 2, 3, [4, -1]], [1, 2, 2**31, []], "off", 7, [1, 2, 3, "x"]])
def test_bad_vllm_counts_on_the_wire_are_refused_in_one_line(value: Any) -> None:
    message = list(msgpack.unpackb(step_event_to_wire(step_event()), raw=False))
    message[22:] = [value]
    with pytest.raises(InvalidRecord, match="'vllm_counts' must be null, one of stats_off, not_returned, or"):
        decode_step(msgpack.packb(message, use_bin_type=True))


def test_a_message_before_1_6_has_no_vllm_counts() -> None:
    message = list(msgpack.unpackb(step_event_to_wire(step_event(vllm_counts=EQUAL)), raw=False))
    assert decode_step(msgpack.packb(message, use_bin_type=True)).vllm_counts == (3, 7, 3, (2, 1, 0))
    assert decode_step(msgpack.packb(message[:22], use_bin_type=True)).vllm_counts is None


def counted_by_vllm(event: StepEvent) -> VllmCounts:
    """What vLLM's scheduler counts of the event's outcomes (make_spec_decoding_stats), written out
    here as the test's own oracle: a draft wherever slots were scheduled, its tokens less the -1 pads
    (all of them where the grammar rejected the draft), its accepted tokens, per position those
    accepted past it."""
    drafts = []
    for o in event.outcomes:
        k_sched = o.k_valid if o.kind == "drafted" else o.k_sched
        if k_sched:
            drafts.append((k_sched if o.kind == "grammar_rejected" else o.k_valid, getattr(o, "accepted", 0)))
    return VllmCounts(num_drafts=len(drafts), num_draft_tokens=sum(t for t, _ in drafts),
                      num_accepted_tokens=sum(a for _, a in drafts),
                      num_accepted_tokens_per_pos=[sum(a > p for _, a in drafts) for p in range(event.num_spec_tokens)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(step_events(), st.sampled_from([None, "drafts", "tokens", "position"])), min_size=1,
                max_size=6))
def test_the_audit_names_exactly_the_steps_whose_counters_differ(drawn: list[tuple[StepEvent, str | None]]) -> None:
    events, differing = [], []
    for i, (event, change) in enumerate(drawn):
        own = counted_by_vllm(event)
        if change == "drafts":
            own = own.model_copy(update={"num_drafts": own.num_drafts + 1})
        elif change == "tokens":
            own = own.model_copy(update={"num_draft_tokens": own.num_draft_tokens + 1})
        elif change == "position":
            own = own.model_copy(update={"num_accepted_tokens_per_pos": [*own.num_accepted_tokens_per_pos, 1]})
        differing += [i] if change else []
        events.append(event.model_copy(update={"event_id": f"e{i}", "step_index": i, "vllm_counts": own,
                                               "event_time": T0 + timedelta(seconds=i)}))
    with tempfile.TemporaryDirectory() as tmp:
        writer = LocalLogWriter(Path(tmp) / "log")
        writer.append([step_event_to_wire(event) for event in events])
        writer.close()
        ingest_once(Path(tmp) / "log", Path(tmp) / "data")
        con = connect(Path(tmp) / "data")
        try:
            steps = run_query(con, "SELECT step_index, differs FROM vllm_audit_steps").to_pylist()
            [total] = run_query(con, "SELECT sum(steps_compared) AS compared, sum(steps_differing) AS differing "
                                     "FROM vllm_audit").to_pylist()
        finally:
            con.close()
    with_rows = [i for i, event in enumerate(events) if event.outcomes]  # a step stores rows only for its outcomes
    assert sorted(row["step_index"] for row in steps if row["differs"]) == [i for i in differing if i in with_rows]
    assert sorted(row["step_index"] for row in steps) == with_rows
    assert total == {"compared": len(with_rows), "differing": len([i for i in differing if i in with_rows])} \
        if with_rows else total == {"compared": None, "differing": None}


def test_the_report_says_how_many_request_steps_lie_in_steps_that_differ_alike_from_rollups_and_rows(
        tmp_path: Path) -> None:
    fewer = VllmCounts(num_drafts=2, num_draft_tokens=4, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 0, 0])
    audit(tmp_path, [{"vllm_counts": EQUAL}, {"vllm_counts": fewer}, {"vllm_counts": EQUAL},
                     {"vllm_counts_missing": "stats_off"}])
    build_missing(tmp_path / "data")
    con = connect(tmp_path / "data")
    try:
        raw = collect(con, Window(None, None), bucket=timedelta(minutes=1))
        stored = collect(con, Window(None, None), bucket=timedelta(minutes=1), stored_rollups=True)
        steps_equal = collect(con, Window(None, T0 + timedelta(seconds=1)))
        stats_off = collect(con, Window(T0 + timedelta(seconds=3), None))
    finally:
        con.close()
    assert stored == raw
    # four outcomes a step: every request-step of the differing step counts, not only its drafted one
    assert [(r["request_steps"], r["audited_request_steps"], r["differing_request_steps"]) for r in raw.audit
            ] == [(16, 12, 4)]
    assert [(r["vllm_version"], r["steps_compared"], r["steps_differing"], r["first_differing_step"])
            for r in raw.drift] == [("0.32.0", 3, 1, 1)]
    text = markdown(raw, T0, {})
    assert ("Warning: 4 of the 12 request-steps checked against vLLM's own counters lie in steps where the "
            "vLLM-reported numbers, rebuilt from the outcomes, differ from them (vLLM 0.32.0): see below.") in text
    assert "## vLLM counts differently from the plugin's model" in text
    assert "| node-a/dp0 | 0.32.0 | tiny-target | draft\\_model | 3 | 1 | 1 | 1 | 1 | 3 | 0 |" in text
    assert '<section id="audit">' in html(raw, T0, [])
    assert ("Checked against vLLM's own counters: the vLLM-reported numbers, rebuilt from the outcomes, equal the "
            "counters vLLM computed at every step of 4 request-steps.") in markdown(steps_equal, T0, {})
    assert "## vLLM counts differently" not in markdown(steps_equal, T0, {}) and not steps_equal.drift
    assert ("Not checked against vLLM's own counters: all 4 request-steps lie in steps without vLLM's own counters "
            "(vLLM computed none: stats off; or written before schema 1.6).") in markdown(stats_off, T0, {})
