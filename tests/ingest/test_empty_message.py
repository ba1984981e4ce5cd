"""An empty record in the log is a dead letter that says it was empty, next to the good records."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.wire import step_event_to_wire
from storage.layout import DEAD_LETTER_DIR
from tests.support.events import step_event
from tests.support.ingest import ingest_once, read_rows
from transport.log import LocalLogWriter


def test_an_empty_record_is_dead_lettered_with_a_clear_reason(log_dir: Path, data_dir: Path) -> None:
    LocalLogWriter(log_dir).append([step_event_to_wire(step_event(event_id="good-0")), b"",
                                    step_event_to_wire(step_event(event_id="good-1"))])
    stats = ingest_once(log_dir, data_dir)
    assert (stats.records, stats.dead_letters) == (3, 1)
    assert sorted(set(read_rows(data_dir)["event_id"].to_pylist())) == ["good-0", "good-1"]
    [letter] = [json.loads(line) for path in (data_dir / DEAD_LETTER_DIR).glob("*.jsonl")
                for line in path.read_text().splitlines()]
    assert (letter["offset"], letter["reason"], letter["payload_base64"]) == (1, "empty message: 0 bytes", "")
