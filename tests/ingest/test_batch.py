"""PartitionBuffer: decoded steps of one partition become the stored table, steps that break the
contract become dead letters with their reason, and an observer hears of every conversion once."""

from __future__ import annotations

from datetime import timedelta

import msgpack
import numpy as np
import pyarrow as pa
import pytest

from specmetrics.ingest import batch
from specmetrics.ingest.batch import PartitionBuffer
from specmetrics.ingest.observer import IngestObserver, ValidatedSteps
from specmetrics.schemas.wire import FIELDS, decode_step, step_event_to_wire
from tests.support.events import T0, step_event
from tests.support.ingest import bad_outcomes_message


class Heard(IngestObserver):
    def __init__(self) -> None:
        self.validated_steps: list[ValidatedSteps] = []

    def validated(self, source: str, steps: ValidatedSteps) -> None:
        assert source == "log"
        self.validated_steps.append(steps)

    def lost(self, source: str, partition: int, first: int, last: int) -> None:
        raise AssertionError("nothing is lost in a buffer")

    def lag(self, source: str, records: dict[int, int]) -> None:
        raise AssertionError("a buffer knows no lag")


def add(buffer: PartitionBuffer, offset: int, payload: bytes) -> None:
    buffer.add(offset, payload, decode_step(payload))


def test_steps_become_rows_with_their_offsets_partition_and_event_times() -> None:
    buffer = PartitionBuffer(partition=2, start_offset=10)
    for i in range(3):
        add(buffer, 10 + i, step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(seconds=i))))
    table, times = buffer.build()
    assert (buffer.rows, buffer.end_offset, table.num_rows) == (12, 12, 12)  # 4 outcomes per step
    assert table.column("log_offset").to_pylist() == [10] * 4 + [11] * 4 + [12] * 4
    assert set(table.column("log_partition").to_pylist()) == {2}
    assert table.column("request_id").to_pylist()[:4] == ["r1", "r2", "r3", "r4"]
    assert times.tolist() == [int((T0 + timedelta(seconds=i)).timestamp() * 1e6) for i in range(3) for _ in range(4)]
    assert buffer.first_event_us == times[0]


def test_schema_1_3_fields_become_columns_and_steps_without_them_nulls() -> None:
    buffer = PartitionBuffer(partition=0, start_offset=0)
    fields: list[dict[str, object]] = [
        {"max_model_len": 96, "context_cap_from": 256, "skip_check": "none"},
        {},  # a schema 1.2 sender in the same batch
        {"max_model_len": 512, "skip_check": "unobserved"},
    ]
    for i, extra in enumerate(fields):
        add(buffer, i, step_event_to_wire(step_event(event_id=f"e{i}", **extra)))
    table, _ = buffer.build()
    per_step = [table.column(name).to_pylist()[::4] for name in ("max_model_len", "context_cap_from", "skip_check")]
    assert per_step == [[96, None, 512], [256, None, None], ["none", None, "unobserved"]]
    assert table.column("skip_check").type == table.schema.field("skip_check").type  # dictionary strings


def test_schema_1_5_seq_lens_become_a_column_with_nulls_where_not_known() -> None:
    buffer = PartitionBuffer(partition=0, start_offset=0)
    known = [{"kind": "drafted", "request_id": f"r{i}", "k_valid": 3, "accepted": 1, "emitted": 2,
              "seq_len": None if i == 2 else 100 + i} for i in range(4)]
    add(buffer, 0, step_event_to_wire(step_event(known, event_id="new")))
    add(buffer, 1, step_event_to_wire(step_event(event_id="old")))  # no length known: a 1.4 sender's too
    too_short = msgpack.unpackb(step_event_to_wire(step_event(known, event_id="bad")))
    too_short[FIELDS.index("seq_lens")] = np.array([1, 2, -3, 4], dtype="<i4").tobytes()
    add(buffer, 2, msgpack.packb(too_short))
    table, _ = buffer.build()
    assert table.column("seq_len").to_pylist() == [100, 101, None, 103, None, None, None, None]
    assert table.schema.field("seq_len").type == pa.int32()
    assert [(d.offset, d.reason) for d in buffer.dead_letters] == [
        (2, "outcome 2: seq_len must be a length (>= 0) or -1 (not known)")]


def test_steps_breaking_the_contract_become_dead_letters_and_the_rest_is_kept() -> None:
    buffer = PartitionBuffer(partition=0, start_offset=0)
    add(buffer, 0, step_event_to_wire(step_event(event_id="good-0")))
    add(buffer, 1, bad_outcomes_message("accepted > k_valid"))
    duplicate = msgpack.unpackb(step_event_to_wire(step_event(event_id="dup")))
    duplicate[FIELDS.index("request_id_data")] = b"r1r1r3r4"  # ids r1, r1, r3, r4
    add(buffer, 2, msgpack.packb(duplicate))
    buffer.reject(3, b"\xc1", "not msgpack")
    add(buffer, 4, step_event_to_wire(step_event(event_id="good-4")))
    table, _ = buffer.build()
    assert sorted(set(table.column("event_id").to_pylist())) == ["good-0", "good-4"]
    assert [(d.offset, d.reason) for d in sorted(buffer.dead_letters, key=lambda d: d.offset)] == [
        (1, "outcome 0: accepted exceeds k_valid"), (2, "request_id r1 appears twice in one step"), (3, "not msgpack")]
    assert buffer.end_offset == 4


def test_the_observer_hears_each_conversion_and_each_dead_letter_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "CHUNK_ROWS", 8)  # two steps of 4 outcomes convert on their own
    heard = Heard()
    buffer = PartitionBuffer(partition=0, start_offset=0, observer=heard, source="log")
    for i in range(2):
        add(buffer, i, step_event_to_wire(step_event(event_id=f"e{i}")))
    buffer.reject(2, b"", "empty message: 0 bytes")
    add(buffer, 3, step_event_to_wire(step_event(event_id="e3")))
    buffer.convert()
    buffer.convert()  # nothing new: nothing told
    assert [(s.step_offsets.tolist(), s.dead_letter_offsets, None if s.rows is None else s.rows.num_rows)
            for s in heard.validated_steps] == [([0, 1], [], 8), ([3], [2], 4)]
    table, _ = buffer.build()
    assert table.num_rows == 12
