"""Any valid step events, stored, are read back by every command that reads a tree: the contract's
whole ranges (event times from year 1 to 9999, every kind, any request id) can make no reader,
``verify`` or report fail. Drawn with hypothesis; the ingester's event-time bounds off, as for an
old log replayed."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import StepEvent
from schemas.wire import step_event_to_wire
from specmetrics.cli import main
from tests.support.events import step_events
from tests.support.ingest import ingest_once
from transport.log import LocalLogWriter

FIRST, LAST = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@st.composite
def any_time_events(draw: st.DrawFn) -> StepEvent:
    """A valid step event, its time anywhere from year 1 to 9999 or near now."""
    event = draw(step_events())
    when = draw(st.one_of(st.just(FIRST), st.just(LAST), st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)),
        st.just(datetime.now(UTC) - timedelta(hours=1))))
    return event.model_copy(update={"event_time": when})


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(any_time_events(), min_size=1, max_size=5))
def test_every_command_reads_back_any_valid_events(events: list[StepEvent], tmp_path_factory: pytest.TempPathFactory,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path_factory.mktemp("any")
    log, data = root / "log", root / "data"
    steps = [event.model_copy(update={"event_id": f"step-{i}"}) for i, event in enumerate(events)]
    LocalLogWriter(log).append([step_event_to_wire(step) for step in steps])
    rows = sum(len(step.outcomes) for step in steps)
    stats = ingest_once(log, data, max_ahead_s=0, max_behind_s=0)
    assert (stats.rows, stats.dead_letters) == (rows, 0)

    assert run(capsys, "verify", "--data", str(data))[0] == 0
    code, out = run(capsys, "sql", "--data", str(data), "--format", "csv",
                    "SELECT count(*) AS n, count(DISTINCT event_id) AS steps FROM request_steps")
    assert code == 0 and list(csv.DictReader(io.StringIO(out))) == [
        {"n": str(rows), "steps": str(len({s.event_id for s in steps if s.outcomes}))}]
    code, out = run(capsys, "sql", "--data", str(data), "--format", "csv",
                    "SELECT sum(num_drafts) AS d FROM acceptance_vllm")
    vllm_drafts = sum(getattr(o, "k_sched", getattr(o, "k_valid", 0)) > 0 for s in steps for o in s.outcomes)
    assert code == 0 and next(csv.DictReader(io.StringIO(out)))["d"] in ({str(vllm_drafts)} if rows else {""})
    expected_report = 0 if rows else 1  # a tree without a request-step has nothing to report
    for extra in ([], ["--raw"], ["--since", "24h"]):
        code, _ = run(capsys, "report", "--data", str(data), "--out", str(root / "reports"), *extra)
        assert code in ((expected_report,) if not extra or extra == ["--raw"] else (0, 1)), extra
    assert run(capsys, "rollup", "--data", str(data))[0] == 0
    assert run(capsys, "verify", "--data", str(data))[0] == 0  # with the rollups
    if rows:
        assert run(capsys, "db", "export", str(root / "x.duckdb"), "--data", str(data))[0] == 0

