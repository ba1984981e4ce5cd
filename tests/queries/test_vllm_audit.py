"""The audit (schema 1.6): vLLM's own counters of each step beside the events' vLLM-compatible ones,
through the wire, ingest and the views; files written before 1.6 read null and are counted apart."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specmetrics.queries import connect, run_query
from specmetrics.schemas.arrow import schema_before
from specmetrics.schemas.events import VllmCounts
from specmetrics.schemas.wire import InvalidRecord, decode_step, step_event_to_wire
from specmetrics.storage.layout import FileName
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event
from tests.support.ingest import ingest_tree_once

#: vLLM's counts of tests.support.events.step_event's default outcomes (drafted 3/2, skipped 3 slots,
#: grammar_invalid 3 slots 1 valid 1 accepted, k_zero): three drafts, 3 + 3 + 1 tokens, 3 accepted.
EQUAL = VllmCounts(num_drafts=3, num_draft_tokens=7, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 1, 0])


def audit(tmp_path: Path, counts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    log = tmp_path / "log"
    writer = LocalLogWriter(log)
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", step_index=i, event_time=T0 + timedelta(seconds=i),
                                                 **fields)) for i, fields in enumerate(counts)])
    writer.close()
    ingest_tree_once(log, tmp_path / "data")
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
