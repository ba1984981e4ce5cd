"""LiveMetrics: totals across batches, nothing counted twice when the ingester reads again."""

from __future__ import annotations

from specmetrics.ingest.batch import PartitionBuffer
from specmetrics.monitoring.live import LiveMetrics
from specmetrics.schemas.wire import decode_step, step_event_to_wire
from tests.support.events import step_event

GROUP = ("node-a/dp0", "tiny-target", "draft_model", 3)


def read(live: LiveMetrics, offsets: range, bad: frozenset[int] = frozenset()) -> None:
    """The ingester's path: steps at ``offsets`` into a buffer, validated and reported to ``live``."""
    buffer = PartitionBuffer(0, offsets.start, observer=live, source="log")
    for offset in offsets:
        payload = b"\xc1" if offset in bad else step_event_to_wire(
            step_event(event_id=f"e{offset}", step_index=offset, dropped_steps=offset, max_model_len=96,
                       context_cap_from=256 + offset))
        if offset in bad:
            buffer.reject(offset, payload, "not msgpack")
        else:
            buffer.add(offset, payload, decode_step(payload))
    buffer.convert()


def test_offsets_read_again_are_not_counted_again() -> None:
    live = LiveMetrics()
    read(live, range(0, 10), bad=frozenset({4}))
    read(live, range(5, 15), bad=frozenset({12}))  # the source reconnected: 5..9 come again
    snapshot = live.snapshot()
    assert (snapshot.health.steps, snapshot.health.request_steps, snapshot.health.dead_letters) == (13, 52, 2)
    kinds: dict[tuple[str, str | None], int] = {}
    for shape, (n, _) in snapshot.shapes.items():
        assert shape[:4] == GROUP
        kinds[shape[4:6]] = kinds.get(shape[4:6], 0) + n
    assert kinds == {("drafted", None): 13, ("skipped_for_length", None): 13, ("grammar_invalid", None): 13,
                     ("k_zero", "no_proposal"): 13}  # 4 kinds, 13 steps each
    assert snapshot.plugin_dropped == {GROUP: 14}
    assert snapshot.context == {GROUP: (96, 256 + 14)}  # the latest step's


def test_the_context_is_reported_only_by_events_that_carry_it() -> None:
    live = LiveMetrics()
    read(live, range(0, 3))
    buffer = PartitionBuffer(0, 3, observer=live, source="log")
    payload = step_event_to_wire(step_event(event_id="e3", step_index=3))  # schema 1.2: no context lengths
    buffer.add(3, payload, decode_step(payload))
    buffer.convert()
    assert live.snapshot().context == {GROUP: (96, 258)}
    other = LiveMetrics()
    buffer = PartitionBuffer(0, 0, observer=other, source="log")
    buffer.add(0, payload, decode_step(payload))
    buffer.convert()
    assert other.snapshot().context == {}


def test_lost_offsets_are_counted_once_and_skipped() -> None:
    live = LiveMetrics()
    read(live, range(0, 5))
    live.lost("log", 0, 5, 9)
    live.lost("log", 0, 5, 9)
    read(live, range(8, 12))  # before the lost range's end: already accounted for
    snapshot = live.snapshot()
    assert (snapshot.health.lost_offsets, snapshot.health.steps) == (5, 7)


def test_lag_per_partition_replaces_the_sources_previous_report() -> None:
    live = LiveMetrics()
    live.lag("topic", {0: 5, 1: 7})
    live.lag("topic", {1: 0})  # partition 0 moved to another ingester
    assert live.snapshot().health.lag == {("topic", 1): 0}
