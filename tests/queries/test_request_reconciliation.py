"""vLLM's per-request metrics (schema 1.7) through the wire, ingest and request_reconciliation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import msgpack
import pytest

from specmetrics.queries import connect, run_query
from specmetrics.schemas.events import VllmRequestMetrics
from specmetrics.schemas.wire import InvalidRecord, decode_step, step_event_to_wire
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event
from tests.support.ingest import ingest_once


def metrics(request_id: str, histogram: list[int], draft_tokens: int, **detailed: list[int]) -> VllmRequestMetrics:
    return VllmRequestMetrics(request_id=request_id, acceptance_histogram=histogram, num_draft_tokens=draft_tokens,
                              **detailed)


def test_each_request_gets_vllms_numbers_the_events_and_why_they_differ(tmp_path: Path) -> None:
    """step_event's default outcomes, twice: r1 drafts 3 and accepts 2 each time; r2 is skipped for length
    (vLLM counts its placeholders as drafts that accepted nothing); r3 breaks the grammar (3 slots, 1
    valid, 1 accepted); r4 is K = 0. r1 and r2 finish at the second step with vLLM's metrics; r3's
    metrics count one draft token more than the events (a drifted model); r4 finishes without."""
    finished = [metrics("r1", [0, 0, 2, 0], 6, per_step_accepted=[2, 2], per_step_drafted=[3, 3]),
                metrics("r2", [2, 0, 0, 0], 6), metrics("r3", [0, 2, 0, 0], 3), metrics("gone", [1, 0, 0, 0], 3)]
    log = tmp_path / "log"
    writer = LocalLogWriter(log)
    writer.append([step_event_to_wire(step_event(event_id="e0", step_index=0)),
                   step_event_to_wire(step_event(event_id="e1", step_index=1, event_time=T0 + timedelta(seconds=1),
                                                 vllm_finished=finished))])
    writer.close()
    assert ingest_once(log, tmp_path / "data").rows == 8
    con = connect(tmp_path / "data")
    try:
        rows = {row.pop("request_id"): row for row in run_query(
            con, "SELECT request_id, vllm_reported_drafts, vllm_reported_draft_tokens, vllm_reported_accepted_tokens, "
                 "vllm_reported_acceptance_rate, vllm_reported_accepted_per_step, vllm_num_drafts, "
                 "vllm_num_draft_tokens, vllm_num_accepted_tokens, differs, num_drafts, acceptance_rate, why "
                 "FROM request_reconciliation").to_pylist()}
    finally:
        con.close()
    assert rows["r1"] == {"vllm_reported_drafts": 2, "vllm_reported_draft_tokens": 6,
                          "vllm_reported_accepted_tokens": 4, "vllm_reported_acceptance_rate": 4 / 6,
                          "vllm_reported_accepted_per_step": [2, 2], "vllm_num_drafts": 2,
                          "vllm_num_draft_tokens": 6, "vllm_num_accepted_tokens": 4, "differs": False,
                          "num_drafts": 2, "acceptance_rate": 4 / 6, "why": ""}
    assert rows["r2"] == {"vllm_reported_drafts": 2, "vllm_reported_draft_tokens": 6,
                          "vllm_reported_accepted_tokens": 0, "vllm_reported_acceptance_rate": 0.0,
                          "vllm_reported_accepted_per_step": [], "vllm_num_drafts": 2, "vllm_num_draft_tokens": 6,
                          "vllm_num_accepted_tokens": 0, "differs": False, "num_drafts": 0, "acceptance_rate": None,
                          "why": "skipped for length"}
    assert (rows["r3"]["vllm_reported_draft_tokens"], rows["r3"]["vllm_num_draft_tokens"], rows["r3"]["differs"]) == (
        3, 2, True)
    assert (rows["r4"]["vllm_reported_drafts"], rows["r4"]["differs"], rows["r4"]["why"]) == (None, None, "")
    assert set(rows) == {"r1", "r2", "r3", "r4"}  # "gone" has no row at its finishing step


@pytest.mark.parametrize("value", [[["r", [1], 2, [], []], "x"], [["", [1], 2, [], []]], [["r", [-1], 2, [], []]],
                                   [["r", [1], 2, []]], "none", [["r", [1], 2**31, [], []]]])
def test_bad_vllm_finished_on_the_wire_is_refused_in_one_line(value: Any) -> None:
    message = list(msgpack.unpackb(step_event_to_wire(step_event()), raw=False))
    message[23:] = [value]
    with pytest.raises(InvalidRecord, match="'vllm_finished' must be null or a list of"):
        decode_step(msgpack.packb(message, use_bin_type=True))


def test_a_message_before_1_7_has_no_vllm_finished() -> None:
    event = step_event(vllm_finished=[metrics("r1", [0, 1, 0, 0], 3)])
    message = list(msgpack.unpackb(step_event_to_wire(event), raw=False))
    assert decode_step(msgpack.packb(message, use_bin_type=True)).vllm_finished == (("r1", (0, 1, 0, 0), 3, (), ()),)
    assert decode_step(msgpack.packb(message[:23], use_bin_type=True)).vllm_finished is None
