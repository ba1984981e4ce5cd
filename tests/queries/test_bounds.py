"""Counts at the contract's bound (32,767, the wire's int16) through the wire, ingest, every view and
the report: none is a dead letter, and no view overflows (DuckDB raises on ``32767::SMALLINT + 1``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.schemas.wire import step_event_to_wire
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event
from tests.support.ingest import ingest_once

BOUND = 32767
near = st.sampled_from([0, 1, BOUND - 1, BOUND])


@st.composite
def outcome_at_the_bound(draw: st.DrawFn, request_id: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["drafted", "skipped_for_length", "grammar_invalid", "grammar_rejected", "k_zero"]))
    if kind == "k_zero":
        return {"kind": kind, "request_id": request_id, "reason": "no_proposal", "emitted": draw(near)}
    fields = {name: draw(near) for name in ("k_valid", "accepted", "emitted")}
    if kind != "drafted":
        fields["k_sched"] = draw(near)
    if kind == "grammar_invalid":
        fields["k_invalid"] = draw(near)
    return {"kind": kind, "request_id": request_id, **fields}


@st.composite
def steps_at_the_bound(draw: st.DrawFn) -> list[Any]:
    events = []
    for index in range(draw(st.integers(1, 4))):
        outcomes = [draw(outcome_at_the_bound(f"r{i}")) for i in range(draw(st.integers(1, 4)))]
        try:
            events.append(step_event(outcomes, event_id=f"e{index}", step_index=index, num_spec_tokens=BOUND,
                                     drafter_max_len=BOUND, event_time=T0 + timedelta(seconds=index)))
        except ValidationError:
            assume(False)
    return events


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(events=steps_at_the_bound())
def test_counts_at_the_bound_pass_ingest_every_view_and_the_report(events: list[Any], tmp_path_factory: Any) -> None:
    root = tmp_path_factory.mktemp("bound")
    writer = LocalLogWriter(root / "log")
    writer.append([step_event_to_wire(event) for event in events])
    writer.close()
    stats = ingest_once(root / "log", root / "data")
    assert (stats.dead_letters, stats.rows) == (0, sum(len(event.outcomes) for event in events))
    con = connect(root / "data")
    try:
        [(accepted, emitted)] = [tuple(row.values()) for row in run_query(
            con, "SELECT sum(accepted), sum(emitted) FROM request_steps").to_pylist()]
        assert (accepted, emitted) == (sum(getattr(o, "accepted", 0) for e in events for o in e.outcomes),
                                       sum(o.emitted for e in events for o in e.outcomes))
        views = [name for (name,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        assert len(views) > 20
        for view in views:
            con.execute(f'SELECT * FROM "{view}"').fetchall()  # a SMALLINT overflow raises
    finally:
        con.close()
    assert main(["report", "--data", str(root / "data"), "--out", str(root / "report"), "--format", "md"]) == 0
