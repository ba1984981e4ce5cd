"""Kafka as the sink: one message per engine step, keyed by engine id, never lost to an outage.

Messages go to an idempotent producer (acks=all). What the broker does not acknowledge within
``request_timeout_s`` (unreachable, restarted, timed out) is appended to the on-disk
:class:`~emitter.sinks.spool.Spool`, in order, and so is everything after it until a new
producer (a restarted broker forgets producer ids, so the old one would fail every send) has
replayed the spool, ``REPLAY_BATCH`` messages per :meth:`KafkaSink.send`: new steps keep flowing
into the spool behind them meanwhile (only when the spool cannot take them, full or on a full
disk, does the rest of the replay go first). Reconnection is attempted with exponential
backoff, and not at all after :meth:`KafkaSink.stop_connecting` (shutdown: the spool keeps what
the open connection cannot take at once). A full spool drops messages, counted in
:meth:`KafkaSink.health` and logged, so the engine is never blocked.
Delivery is at least once: a message whose acknowledgement was lost is replayed, and so is one
whose replay the spool could not record (a full disk; see :meth:`Spool.acknowledge`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from specmetrics.emitter.sinks.base import Sink
from specmetrics.emitter.sinks.spool import Spool, SpoolFull
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings, ensure_topic

logger = logging.getLogger("vllm.specmetrics")
REPLAY_BATCH = 2_000  # spooled messages replayed per send: the publisher thread is back within a few seconds
_MAX_UNFLUSHED = 10_000


@dataclass
class KafkaSinkHealth:
    delivered: int = 0
    delivered_bytes: int = 0
    spooled: int = 0
    replayed: int = 0
    dropped_spool_full: int = 0
    producers_created: int = 0
    spool_pending: int = 0


class KafkaSink(Sink):
    def __init__(self, address: KafkaAddress, settings: KafkaSettings, spool_dir: Path) -> None:
        self.address = address
        self.settings = settings
        self.spool = Spool(spool_dir, settings.spool_max_bytes)
        self.stats = KafkaSinkHealth(spool_pending=self.spool.pending)
        self._producer: KafkaProducer | None = None
        self._unflushed: list[tuple[bytes, bytes, Any]] = []  # (key, value, future or None: not handed over)
        self._broken = False  # a send failed since the last flush: the rest of the batch waits for it
        self._retry_at = 0.0
        self._backoff_s = 0.5
        self._outage_logged = False
        self._full_logged = False
        self._connecting = True  # False once the owner shuts down: no more connection attempts

    def send(self, key: bytes, messages: Sequence[bytes]) -> None:
        if not self._unflushed and not self._ready() and self._spool_behind_replay([(key, m) for m in messages]):
            return
        for message in messages:
            future = None
            if not self._broken and self._producer is not None:
                try:
                    future = self._producer.send(self.address.topic, value=message, key=key)
                except KafkaError as exc:
                    self._broken = True
                    self._log_outage(exc)
            self._unflushed.append((key, message, future))
        if len(self._unflushed) >= _MAX_UNFLUSHED:
            self.flush()

    def flush(self) -> None:
        """Wait for acknowledgements; spool whatever was not acknowledged."""
        if not self._unflushed:
            return
        unflushed, self._unflushed = self._unflushed, []
        if self._producer is not None:
            try:
                self._producer.flush(timeout=self.settings.request_timeout_s)
            except KafkaError as exc:
                self._log_outage(exc)
        failed = []
        for key, value, future in unflushed:
            if future is not None and future.is_done and future.succeeded():
                self.stats.delivered += 1
                self.stats.delivered_bytes += len(value)
            else:
                failed.append((key, value))
        if failed:
            self._disconnect()
            self._to_spool(failed)
        self._broken = False

    def stop_connecting(self) -> None:
        self._connecting = False

    def close(self) -> None:
        try:
            self.flush()
            if self.spool.pending:
                self._retry_at = 0.0  # one last attempt, whatever the backoff says (none when shutting down)
                while self._connecting and not self._ready() and self._producer is not None:
                    pass  # replayed chunk by chunk; a failed chunk disconnects
                if self.spool.pending:
                    logger.warning("specmetrics: %d message(s) stay in the spool %s for the next start",
                                   self.spool.pending, self.spool.directory)
        finally:
            self._disconnect()
            self.spool.close()

    def health(self) -> dict[str, int]:
        self.stats.spool_pending = self.spool.pending
        return asdict(self.stats)

    def _ready(self) -> bool:
        """Connected, with an empty spool (connecting and replaying it first if due)."""
        if not self._connecting and (self._producer is None or self.spool.pending):
            return False  # shutting down: a connection attempt or a replay would outlast it; the spool keeps them
        if self._producer is None:
            if time.monotonic() < self._retry_at:
                return False
            try:
                ensure_topic(self.address, self.settings)
                self._producer = self._new_producer()
            except KafkaError as exc:
                self._log_outage(exc)
                self._retry_at = time.monotonic() + self._backoff_s
                self._backoff_s = min(self._backoff_s * 2, self.settings.reconnect_max_s)
                return False
        return self._replay()

    def _spool_behind_replay(self, items: list[tuple[bytes, bytes]]) -> bool:
        """Spool ``items`` while the broker is out or the spool is being replayed: True when done
        (spooled, or dropped and counted). False when the spool cannot take them but the broker
        can: then the replay is finished first, and the caller sends them."""
        if self._producer is None or not self._connecting:
            self._to_spool(items)
            return True
        try:
            self.spool.append(items)
            self.stats.spooled += len(items)
            return True
        except (SpoolFull, OSError):
            pass
        while not self._replay() and self._producer is not None:
            pass
        if self._producer is None:  # the broker failed during the replay
            self._to_spool(items)
            return True
        return False

    def _replay(self) -> bool:
        """Replay up to ``REPLAY_BATCH`` spooled messages; True when the spool is empty."""
        if items := self.spool.peek(REPLAY_BATCH):
            assert self._producer is not None
            try:
                futures = [self._producer.send(self.address.topic, value=v, key=k) for k, v in items]
                self._producer.flush(timeout=self.settings.request_timeout_s)
            except KafkaError as exc:
                self._log_outage(exc)
                self._disconnect()
                return False
            delivered = next((i for i, f in enumerate(futures) if not (f.is_done and f.succeeded())), len(futures))
            self.spool.acknowledge(delivered)
            self.stats.replayed += delivered
            if delivered < len(futures):
                self._disconnect()
                return False
            if self.spool.pending:
                return False
        if self._outage_logged:
            logger.warning("specmetrics: Kafka at %s is reachable again; the spool is replayed",
                           ",".join(self.address.bootstrap_servers))
            self._outage_logged = self._full_logged = False
        self._backoff_s = 0.5
        return True

    def _to_spool(self, items: list[tuple[bytes, bytes]]) -> None:
        try:
            self.spool.append(items)
            self.stats.spooled += len(items)
        except (SpoolFull, OSError) as exc:
            self.stats.dropped_spool_full += len(items)
            if not self._full_logged:
                self._full_logged = True
                logger.error("specmetrics: cannot spool while Kafka is unreachable (%s); messages are dropped and "
                             "counted until it is back", exc)

    def _new_producer(self) -> KafkaProducer:
        timeout_ms = int(self.settings.request_timeout_s * 1000)
        producer = KafkaProducer(
            bootstrap_servers=list(self.address.bootstrap_servers),
            acks="all",
            enable_idempotence=True,
            compression_type=self.settings.compression_type,
            linger_ms=5,
            batch_size=1024 * 1024,  # several steps per record batch: far less per-batch work for consumers
            max_block_ms=timeout_ms,
            delivery_timeout_ms=2 * timeout_ms,
            max_request_size=16 * 1024 * 1024,
            **self.settings.client_config(),
        )
        self.stats.producers_created += 1
        return producer

    def _disconnect(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            try:
                producer.close(timeout=0)
            except Exception:  # closing a producer whose broker is gone may fail as well
                logger.debug("specmetrics: closing the Kafka producer failed", exc_info=True)
            self._retry_at = time.monotonic() + self._backoff_s

    def _log_outage(self, exc: Exception) -> None:
        if not self._outage_logged:
            self._outage_logged = True
            logger.warning("specmetrics: Kafka at %s is unreachable (%s: %s); spooling to %s",
                           ",".join(self.address.bootstrap_servers), type(exc).__name__, exc, self.spool.directory)
