"""From the engine thread to the sink without ever blocking the engine.

``publish`` appends one step's plain values to a bounded queue (a full queue drops the step
and counts it). A daemon thread takes batches off the queue, encodes them and hands them to
the sink; a failing sink is counted, logged once per kind of error, and reopened on the next
batch. A second daemon thread writes the health record (counters) every
``health_interval_s``, so drops are reported even while the sink hangs. ``close`` drains what
is queued, within its timeout.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from emitter.settings import EmitterSettings
from emitter.sinks.base import Sink
from ingest.durable import write_atomically
from schemas.events import engine_id
from schemas.wire import OutcomeColumns, encode_step

logger = logging.getLogger("vllm.specmetrics")  # only the plugin publishes: log among vLLM's lines


class StepRecord(NamedTuple):
    """One engine step as plain values: what the engine thread hands over."""

    envelope: dict[str, Any]
    outcomes: OutcomeColumns


@dataclass
class PublisherHealth:
    """Counters of the publisher; ``dropped_*`` steps never reached the sink."""

    published_steps: int = 0
    sent_steps: int = 0
    dropped_queue_full: int = 0
    dropped_sink_error: int = 0
    sink_errors: int = 0


class EventPublisher:
    def __init__(self, open_sink: Callable[[], Sink], settings: EmitterSettings) -> None:
        self._open_sink = open_sink
        self._settings = settings
        self._queue: queue.Queue[StepRecord | None] = queue.Queue(maxsize=settings.queue_steps)
        self.health = PublisherHealth()
        self._sink: Sink | None = None
        self._errors_seen: set[str] = set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specmetrics-publisher", daemon=True)
        self._thread.start()
        self._health_thread = threading.Thread(target=self._report_periodically, name="specmetrics-health",
                                               daemon=True)
        self._health_thread.start()

    def publish(self, record: StepRecord) -> None:
        """Hand over one step; never blocks. Called on the engine thread."""
        try:
            self._queue.put_nowait(record)
            self.health.published_steps += 1
        except queue.Full:
            self.health.dropped_queue_full += 1

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout_s``), write a last health record."""
        if self._closed.is_set():
            return
        self._closed.set()
        deadline = time.monotonic() + timeout_s
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            logger.warning("specmetrics: the sink is stalled; %d queued step(s) are not sent", self._queue.qsize())
        self._thread.join(max(deadline - time.monotonic(), 0))
        self.report()

    def _run(self) -> None:
        interval = self._settings.flush_interval_ms / 1000
        while True:
            batch: list[StepRecord] = []
            stop = False
            try:
                item = self._queue.get(timeout=interval)
                deadline = time.monotonic() + interval
                while item is not None:
                    batch.append(item)
                    if len(batch) >= self._settings.batch_steps:
                        break
                    item = self._queue.get(timeout=max(deadline - time.monotonic(), 0))
                stop = item is None
            except queue.Empty:
                pass
            if batch:
                self._send(batch)
            if stop:
                self._close_sink()
                return

    def _send(self, batch: list[StepRecord]) -> None:
        try:
            by_engine: dict[bytes, list[bytes]] = {}
            for record in batch:
                key = engine_id(record.envelope["engine_instance"], record.envelope["dp_rank"]).encode()
                by_engine.setdefault(key, []).append(encode_step(record.envelope, record.outcomes))
            if self._sink is None:
                self._sink = self._open_sink()
            for key, messages in by_engine.items():
                self._sink.send(key, messages)
            self._sink.flush()
            self.health.sent_steps += len(batch)
        except Exception as exc:
            self.health.dropped_sink_error += len(batch)
            self.health.sink_errors += 1
            kind = type(exc).__name__
            if kind not in self._errors_seen:
                self._errors_seen.add(kind)
                logger.error("specmetrics: the sink failed (%s: %s); steps are dropped and counted until it "
                             "works again", kind, exc)
            self._close_sink()

    def _close_sink(self) -> None:
        if self._sink is not None:
            try:
                self._sink.close()
            except Exception:  # a sink that failed may fail to close too
                logger.debug("specmetrics: closing the sink failed", exc_info=True)
            self._sink = None

    def _report_periodically(self) -> None:
        while not self._closed.wait(self._settings.health_interval_s):
            self.report()

    def report(self) -> None:
        """Log the counters and write the health record (JSON) if a file is configured."""
        health = asdict(self.health)
        health["queued_steps"] = self._queue.qsize()
        dropped = health["dropped_queue_full"] + health["dropped_sink_error"]
        (logger.warning if dropped else logger.info)("specmetrics health: %s", health)
        if self._settings.health_file is not None:
            try:
                write_atomically(self._settings.health_file, json.dumps({"time": time.time(), **health}).encode())
            except OSError as exc:
                logger.debug("specmetrics: cannot write the health file: %s", exc)

