"""From the engine thread to the sink without ever blocking the engine.

``publish`` appends one step's plain values to a bounded queue (a full queue drops the step
and counts it). A daemon thread wakes every ``flush_interval_ms``, drains the queue in
batches, builds and encodes the events and hands them to the sink; a failing sink is
counted, logged once per kind of error, and reopened on the next batch. A second daemon
thread writes the health record (counters) every ``health_interval_s``, so drops are
reported even while the sink hangs. ``close`` drains what is queued, within its timeout:
from then on the sink makes no new connection attempt (the Kafka sink spools instead), and
the steps it has not taken when the timeout ends are counted as ``dropped_at_close``.
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

from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.sinks.base import Sink
from specmetrics.schemas.events import engine_id
from specmetrics.schemas.wire import OutcomeColumns, encode_step
from specmetrics.storage.durable import write_atomically

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
    dropped_at_close: int = 0  # queued or being sent when close stopped waiting
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
        self._lock = threading.Lock()  # close and the publisher thread count the batch in flight
        self._in_flight = 0  # steps drained from the queue and not yet counted
        self._abandoned = False  # close stopped waiting: the thread sends no further batch
        self._closed = threading.Event()  # set once close has counted every step
        self._report_lock = threading.Lock()
        self._reported_last = False  # the record written after close counted everything
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specmetrics-publisher", daemon=True)
        self._thread.start()
        self._health_thread = threading.Thread(target=self._report_periodically, name="specmetrics-health",
                                               daemon=True)
        self._health_thread.start()

    def publish(self, step: Any) -> bool:
        """Hand over one step; never blocks. Called on the engine thread. False: dropped."""
        if len(self._queue) < self._limit:
            self._queue.append(step)
            self.health.published_steps += 1
            return True
        if self._stopping.is_set():  # closed (its limit is 0): nothing would send it any more
            self.health.dropped_at_close += 1
        else:
            self.health.dropped_queue_full += 1
        return False

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout_s``), write a last health record."""
        if self._closed.is_set():
            return
        self._stopping.set()
        self._limit = 0  # steps published from now on are dropped and counted
        self._thread.join(timeout_s)
        with self._lock:
            self._abandoned = self._thread.is_alive()
            unsent = self._in_flight + len(self._queue) if self._abandoned else 0
            self.health.dropped_at_close += unsent
        if self._abandoned:
            logger.warning("specmetrics: the sink is stalled (not done within %.1f s); %d step(s) are not sent "
                           "(counted as dropped_at_close)", timeout_s, unsent)
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
                if self._abandoned:
                    break
            if stopping:
                if self._sink is not None:  # even with nothing left to send: close must not connect
                    self._sink.stop_connecting()
                self._close_sink()
                return

    def _drain(self, limit: int) -> list[Any]:
        batch: list[Any] = []
        with self._lock:
            if self._abandoned:
                return batch
            try:
                while len(batch) < limit:
                    batch.append(self._queue.popleft())
            except IndexError:
                pass
            self._in_flight = len(batch)
        return batch

    def _count(self, counter: str, steps: int) -> None:
        """Count ``steps`` of the batch in flight (close may have counted them as dropped already)."""
        with self._lock:
            setattr(self.health, counter, getattr(self.health, counter) + steps)
            self._in_flight -= steps
            if self._abandoned:
                self.health.dropped_at_close -= steps

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
                envelope["dropped_steps"] = self._dropped_steps()
                key = engine_id(envelope["engine_instance"], envelope["dp_rank"]).encode()
                by_engine.setdefault(key, []).append(encode_step(envelope, outcomes))
            if not by_engine:
                return
            if self._sink is None:
                self._sink = self._open_sink()
            if self._stopping.is_set():
                self._sink.stop_connecting()
            for key, messages in by_engine.items():
                self._sink.send(key, messages)
            self._sink.flush()
            self._sink_health = self._sink.health()
            self._count("sent_steps", len(batch) - empty)
        except Exception as exc:
            self._count("dropped_sink_error", len(batch) - empty)
            self.health.sink_errors += 1
            kind = type(exc).__name__
            if kind not in self._errors_seen:
                self._errors_seen.add(kind)
                logger.error("specmetrics: the sink failed (%s: %s); steps are dropped and counted until it "
                             "works again", kind, exc)
            self._close_sink()
        finally:
            self._count("empty_steps", empty)

    def _dropped_steps(self) -> int:
        """Steps this process dropped so far: every step event carries it to the live metrics."""
        health = self.health
        return health.dropped_queue_full + health.dropped_sink_error + health.dropped_at_close

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
        """Log the counters and write the health record (JSON) if a file is configured. Records are
        written one at a time, and none after the first taken once close counted everything (the
        last): a periodic record taken before it must not overwrite it."""
        with self._report_lock:
            if self._reported_last:
                return
            self._reported_last = self._closed.is_set()
            health = asdict(self.health)
            health["queued_steps"] = len(self._queue)
            if self._sink_health:
                health["sink"] = self._sink_health
            dropped = sum(count for name, count in health.items() if name.startswith("dropped_"))
            (logger.warning if dropped else logger.info)("specmetrics health: %s", health)
            if self._settings.health_file is not None:
                try:
                    write_atomically(self._settings.health_file,
                                     json.dumps({"time": time.time(), **health}).encode())
                except OSError as exc:
                    logger.debug("specmetrics: cannot write the health file: %s", exc)

