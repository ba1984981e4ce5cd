"""Any valid step events, stored, are read back by every command that reads a tree: the contract's
whole ranges (event times from year 1 to 9999, every kind, any request id) can make no reader,
``verify`` or report fail; and boundary values in otherwise valid events (huge, negative, off by
one; request ids of any size and bytes) are each a dead letter with a reason or stored exactly.
Drawn with hypothesis; the ingester's event-time bounds off, as for an old log replayed."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import msgpack
import numpy as np
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmetrics.cli import main
from specmetrics.schemas import StepEvent
from specmetrics.schemas.codes import OUTCOME_COLUMNS, OUTCOME_DTYPE
from specmetrics.schemas.wire import FIELDS, step_event_from_wire, step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import step_events
from tests.support.ingest import ingest_once, read_rows

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



BOUNDARY = st.sampled_from([-(2**63), -(2**31) - 1, -(2**31), -32769, -32768, -1, 0, 1, 2, 5, 32767, 32768,
                            2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1])
ENVELOPE_INTS = ("dp_rank", "num_spec_tokens", "drafter_max_len", "step_index", "event_time_us",
                 "batch_max_seq_len", "drafts_verified", "dropped_steps", "max_model_len", "context_cap_from")


@st.composite
def fuzzed_messages(draw: st.DrawFn) -> bytes:
    """A valid step message with some envelope integers, outcome fields and request ids replaced by
    boundary values: huge, negative, off by one, ids of any size and bytes."""
    message = list(msgpack.unpackb(step_event_to_wire(draw(step_events()))))
    for name in draw(st.lists(st.sampled_from(ENVELOPE_INTS), max_size=3, unique=True)):
        message[FIELDS.index(name)] = draw(BOUNDARY)
    n = message[FIELDS.index("n")]
    if n:
        packed = np.frombuffer(message[FIELDS.index("outcomes")], dtype=OUTCOME_DTYPE).copy()
        for _ in range(draw(st.integers(0, 3))):
            column = draw(st.sampled_from(OUTCOME_COLUMNS))
            limits = (0, 255) if column in ("kind", "k_zero_reason") else (-32768, 32767)
            packed[column][draw(st.integers(0, n - 1))] = draw(st.integers(*limits))
        message[FIELDS.index("outcomes")] = packed.tobytes()
        if draw(st.booleans()):
            ids = draw(st.lists(st.binary(min_size=0, max_size=300), min_size=n, max_size=n))
            message[FIELDS.index("request_id_offsets")] = np.cumsum([0, *map(len, ids)], dtype=np.int32).tobytes()
            message[FIELDS.index("request_id_data")] = b"".join(ids)
    return bytes(msgpack.packb(message))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(fuzzed_messages(), min_size=1, max_size=6))
def test_boundary_values_are_a_dead_letter_with_a_reason_or_stored_exactly(
        messages: list[bytes], tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    """Each record is either set aside with a reason, or stored with exactly its own counts; then
    the views, verify and the report still read the tree."""
    root = tmp_path_factory.mktemp("fuzz")
    log, data = root / "log", root / "data"
    records = []
    for i, payload in enumerate(messages):
        message = list(msgpack.unpackb(payload))
        message[FIELDS.index("event_id")] = f"step-{i}"
        records.append(bytes(msgpack.packb(message)))
    LocalLogWriter(log).append(records)
    stats = ingest_once(log, data, max_ahead_s=0, max_behind_s=0)
    letters = {line["offset"]: line["reason"] for path in (data / DEAD_LETTER_DIR).glob("*.jsonl")
               for line in map(json.loads, path.read_text().splitlines())}
    assert all(letters.values())
    stored = read_rows(data) if list(data.glob(DATA_GLOB)) else None
    for offset, record in enumerate(records):
        if offset in letters:
            continue
        step = step_event_from_wire(record)  # what was stored must follow the contract
        rows = [] if stored is None else stored.filter(pc.equal(stored["log_offset"], offset)).to_pylist()
        assert [(r["request_id"], r["kind"], r["k_sched"], r["k_valid"], r["accepted"]) for r in rows] == [
            (o.request_id, o.kind, getattr(o, "k_sched", getattr(o, "k_valid", 0)), getattr(o, "k_valid", 0),
             getattr(o, "accepted", 0)) for o in step.outcomes]
    assert stats.dead_letters == len(letters)
    assert run(capsys, "verify", "--data", str(data))[0] in (0, 3)
    code, out = run(capsys, "sql", "--data", str(data), "--format", "csv", "SELECT count(*) AS n FROM request_steps")
    assert code == 0 and next(csv.DictReader(io.StringIO(out)))["n"] == str(stats.rows)
    assert run(capsys, "report", "--data", str(data), "--out", str(root / "reports"))[0] == (0 if stats.rows else 1)
