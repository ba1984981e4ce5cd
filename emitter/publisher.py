"""From the engine thread to the sink without ever blocking the engine.

``publish`` appends one step's plain values to a bounded queue (a full queue drops the step
and counts it). A daemon thread wakes every ``flush_interval_ms``, drains the queue in
batches, builds and encodes the events and hands them to the sink; a failing sink is
counted, logged once per kind of error, and reopened on the next batch. A second daemon
thread writes the health record (counters) every ``health_interval_s``, so drops are
reported even while the sink hangs. ``close`` drains what is queued, within its timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from emitter.settings import EmitterSettings
from emitter.sinks.base import Sink
from ingest.durable import write_atomically
from schemas.events import engine_id
from schemas.wire import OutcomeColumns, encode_step

logger = logging.getLogger("vllm.specmetrics")  # only the plugin publishes: log among vLLM's lines


Event = tuple[dict[str, Any], OutcomeColumns]


@dataclass
class PublisherHealth:
    """Counters of the publisher; ``dropped_*`` steps never reached the sink."""

    published_steps: int = 0
    sent_steps: int = 0
    empty_steps: int = 0  # steps in which no request was verified (nothing to send)
    dropped_queue_full: int = 0
    dropped_sink_error: int = 0
    sink_errors: int = 0


class EventPublisher:
    def __init__(self, open_sink: Callable[[], Sink], settings: EmitterSettings,
                 to_event: Callable[[Any], Event | None]) -> None:
        """``to_event`` turns what the engine thread published into a step event (on this
        object's thread, so the engine thread only hands over references)."""
        self._open_sink = open_sink
        self._settings = settings
        self._to_event = to_event
        self._queue: deque[Any] = deque()  # append/popleft are atomic: no lock on the engine thread
        self._limit = settings.queue_steps
        self.health = PublisherHealth()
        self._sink: Sink | None = None
        self._sink_health: dict[str, int] = {}
        self._errors_seen: set[str] = set()
        self._closed = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specmetrics-publisher", daemon=True)
        self._thread.start()
        self._health_thread = threading.Thread(target=self._report_periodically, name="specmetrics-health",
                                               daemon=True)
        self._health_thread.start()

    def publish(self, step: Any) -> None:
        """Hand over one step; never blocks. Called on the engine thread."""
        if len(self._queue) < self._limit:
            self._queue.append(step)
            self.health.published_steps += 1
        else:
            self.health.dropped_queue_full += 1

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout_s``), write a last health record."""
        if self._closed.is_set():
            return
        self._stopping.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            logger.warning("specmetrics: the sink is stalled; %d queued step(s) are not sent", len(self._queue))
        self._closed.set()
        self.report()

    def _run(self) -> None:
        """Every flush interval, drain the queue in batches. Sleeping between drains (instead of
        waking on every step) keeps this thread off the GIL while the engine thread works."""
        interval = self._settings.flush_interval_ms / 1000
        while True:
            stopping = self._stopping.wait(interval)
            while batch := self._drain(self._settings.batch_steps):
                self._send(batch)
            if stopping:
                self._close_sink()
                return

    def _drain(self, limit: int) -> list[Any]:
        batch: list[Any] = []
        try:
            while len(batch) < limit:
                batch.append(self._queue.popleft())
        except IndexError:
            pass
        return batch

    def _send(self, batch: list[Any]) -> None:
        empty = 0  # steps of this batch with nothing to send; every other step is sent or dropped
        try:
            by_engine: dict[bytes, list[bytes]] = {}
            for step in batch:
                event = self._to_event(step)
                if event is None:
                    empty += 1
                    continue
                envelope, outcomes = event
                key = engine_id(envelope["engine_instance"], envelope["dp_rank"]).encode()
                by_engine.setdefault(key, []).append(encode_step(envelope, outcomes))
            if not by_engine:
                return
            if self._sink is None:
                self._sink = self._open_sink()
            for key, messages in by_engine.items():
                self._sink.send(key, messages)
            self._sink.flush()
            self._sink_health = self._sink.health()
            self.health.sent_steps += len(batch) - empty
        except Exception as exc:
            self.health.dropped_sink_error += len(batch) - empty
            self.health.sink_errors += 1
            kind = type(exc).__name__
            if kind not in self._errors_seen:
                self._errors_seen.add(kind)
                logger.error("specmetrics: the sink failed (%s: %s); steps are dropped and counted until it "
                             "works again", kind, exc)
            self._close_sink()
        finally:
            self.health.empty_steps += empty

    def _close_sink(self) -> None:
        if self._sink is not None:
            try:
                self._sink.close()
                self._sink_health = self._sink.health()
            except Exception:  # a sink that failed may fail to close too
                logger.debug("specmetrics: closing the sink failed", exc_info=True)
            self._sink = None

    def _report_periodically(self) -> None:
        while not self._closed.wait(self._settings.health_interval_s):
            self.report()

    def report(self) -> None:
        """Log the counters and write the health record (JSON) if a file is configured."""
        health = asdict(self.health)
        health["queued_steps"] = len(self._queue)
        if self._sink_health:
            health["sink"] = self._sink_health
        dropped = health["dropped_queue_full"] + health["dropped_sink_error"]
        (logger.warning if dropped else logger.info)("specmetrics health: %s", health)
        if self._settings.health_file is not None:
            try:
                write_atomically(self._settings.health_file, json.dumps({"time": time.time(), **health}).encode())
            except OSError as exc:
                logger.debug("specmetrics: cannot write the health file: %s", exc)

