"""The publisher: never blocks, counts every drop, drains on close (real local-log sinks)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from devtools.kafka_broker import TansuBroker
from devtools.ports import free_port
from specmetrics.emitter import publisher as publisher_module
from specmetrics.emitter.publisher import EventPublisher
from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.sinks import open_sink
from specmetrics.emitter.sinks.spool import Spool
from specmetrics.schemas.wire import OutcomeColumns, decode_step
from specmetrics.transport.log.reader import LocalLogReader
from tests.support.ingest import ingest_once, read_rows


def event(i: int) -> tuple[dict[str, Any], OutcomeColumns]:
    envelope = {"event_id": f"e{i}", "engine_instance": "x", "dp_rank": 0, "model": "m", "vllm_version": "v",
                "method": "draft_model", "num_spec_tokens": 3, "drafter_max_len": 96, "step_index": i,
                "event_time_us": 1_700_000_000_000_000 + i, "batch_max_seq_len": 10}
    return envelope, OutcomeColumns([f"r{i}"], [0], [0], [3], [3], [0], [2], [3])


def publisher(sink_url: str, **settings: Any) -> EventPublisher:
    return EventPublisher(lambda: open_sink(sink_url), EmitterSettings(sink=sink_url, **settings),
                          lambda i: None if i < 0 else event(i))


def test_every_step_reaches_the_log_in_order(tmp_path: Path) -> None:
    pub = publisher((tmp_path / "log").as_uri(), flush_interval_ms=5, batch_steps=7)
    for i in [*range(50), -1]:
        pub.publish(i)
    pub.close()
    assert (pub.health.published_steps, pub.health.sent_steps, pub.health.empty_steps) == (51, 50, 1)
    ingest_once(tmp_path / "log", tmp_path / "data")
    assert read_rows(tmp_path / "data")["step_index"].to_pylist() == list(range(50))


def test_a_full_queue_drops_and_counts_instead_of_blocking(tmp_path: Path) -> None:
    health_file = tmp_path / "health.json"
    pub = publisher((tmp_path / "log").as_uri(), queue_steps=10, flush_interval_ms=60_000,
                    health_file=health_file)
    for i in range(25):
        pub.publish(i)
    assert (pub.health.published_steps, pub.health.dropped_queue_full) == (10, 15)
    pub.close()
    assert json.loads(health_file.read_text())["dropped_queue_full"] == 15
    assert pub.health.sent_steps == 10
    assert sent_dropped_steps(tmp_path / "log") == [15] * 10


def sent_dropped_steps(log: Path) -> list[int | None]:
    """The ``dropped_steps`` every step in the local log carries."""
    return [decode_step(record.payload).dropped_steps for record in LocalLogReader(log).read(1000)]


def test_a_failing_sink_is_counted_and_retried(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    pub = publisher((blocker / "log").as_uri(), flush_interval_ms=5)
    pub.publish(1)
    deadline = time.monotonic() + 10
    while pub.health.sink_errors == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    blocker.unlink()  # the disk is back
    blocker.mkdir()
    pub.publish(2)
    pub.close()
    assert (pub.health.sink_errors, pub.health.dropped_sink_error, pub.health.sent_steps) == (1, 1, 1)
    ingest_once(blocker / "log", tmp_path / "data")
    assert read_rows(tmp_path / "data")["step_index"].to_pylist() == [2]
    assert sent_dropped_steps(blocker / "log") == [1]


def test_a_close_during_a_broker_outage_spools_every_step_without_waiting_for_the_broker(tmp_path: Path) -> None:
    pub = publisher(f"kafka://127.0.0.1:{free_port()}/steps", flush_interval_ms=100)  # nothing listens there
    for i in range(200):
        pub.publish(i)
    started = time.monotonic()
    pub.close(5.0)  # as the plugin does at EngineCore.shutdown; one connection attempt takes 10 s
    assert time.monotonic() - started < 2.5
    assert (pub.health.sent_steps, pub.health.dropped_at_close) == (200, 0)
    spool = Spool(tmp_path / "spool" / "steps-default", 1 << 30)  # what the next start replays
    assert spool.pending == 200


def test_a_close_with_nothing_queued_during_an_outage_does_not_try_the_broker_again(tmp_path: Path) -> None:
    pub = publisher(f"kafka://127.0.0.1:{free_port()}/steps", flush_interval_ms=50)  # nothing listens there
    pub.publish(0)
    deadline = time.monotonic() + 30
    while pub.health.sent_steps == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # spooled
    time.sleep(1.5)  # the sink's reconnection pause has passed: a close that connects would wait 10 s
    started = time.monotonic()
    pub.close(5.0)
    assert time.monotonic() - started < 2.5 and not pub._thread.is_alive()
    assert Spool(tmp_path / "spool" / "steps-default", 1 << 30).pending == 1


def test_steps_a_hung_broker_holds_past_the_close_timeout_are_counted_as_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_REQUEST_TIMEOUT_S", "3")
    broker = TansuBroker().start()
    broker.pause()
    health_file = tmp_path / "health.json"
    try:
        pub = publisher(broker.url("steps"), flush_interval_ms=20, health_file=health_file)
        pub.publish(0)
        time.sleep(0.5)  # step 0 is in the sink's first connection attempt, which the broker never answers
        for i in range(1, 21):
            pub.publish(i)
        pub.close(1.0)
        assert pub.health.dropped_at_close == 21 and "21 step(s) are not sent" in caplog.text
        assert json.loads(health_file.read_text())["dropped_at_close"] == 21
        deadline = time.monotonic() + 15
        while pub.health.sent_steps == 0 and time.monotonic() < deadline:
            time.sleep(0.1)  # the attempt times out and step 0 is spooled after all: no longer counted as dropped
        assert (pub.health.sent_steps, pub.health.dropped_at_close) == (1, 20)
    finally:
        broker.resume()
        broker.stop()


def test_the_last_health_record_is_the_closes_even_when_a_periodic_one_is_being_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A periodic record whose write was still under way when close wrote the last one must not
    land after it: the file then said a step was published that was neither sent nor dropped."""
    health_file = tmp_path / "health.json"
    pub = publisher((tmp_path / "log").as_uri(), flush_interval_ms=5, health_interval_s=3600.0,
                    health_file=health_file)
    for i in range(10):
        pub.publish(i)
    written = threading.Event()
    release = threading.Event()
    real_write = publisher_module.write_atomically

    def slow_first_write(path: Path, data: bytes) -> None:
        if not written.is_set():  # the periodic record: held until close has written its own
            written.set()
            release.wait(10)
        real_write(path, data)

    monkeypatch.setattr(publisher_module, "write_atomically", slow_first_write)
    periodic = threading.Thread(target=pub.report)
    periodic.start()
    assert written.wait(10)
    closing = threading.Thread(target=pub.close)
    closing.start()
    closing.join(1.0)  # close sends the queue and writes the last record (or waits for the periodic one)
    release.set()
    periodic.join(10)
    closing.join(10)
    last = json.loads(health_file.read_text())
    assert (last["published_steps"], last["sent_steps"], last["queued_steps"]) == (10, 10, 0)
