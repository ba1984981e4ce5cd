"""The sink extension point: where encoded step events go."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence


class Sink(ABC):
    """A destination for encoded step messages (the local log, Kafka).

    Implementations are used from one thread at a time (the emitter's background thread or
    a load generator), so they need no locking of their own.
    """

    @abstractmethod
    def send(self, key: bytes, messages: Sequence[bytes]) -> None:
        """Hand over ``messages`` in order. ``key`` (the engine id) keeps one engine's
        messages in order on partitioned transports. Raises on failure; a message is
        delivered once ``send`` (local log) or :meth:`flush` (buffered transports) returns."""

    def flush(self) -> None:
        """Block until everything sent so far is durable. The default does nothing."""

    def stop_connecting(self) -> None:
        """The owner is shutting down: from now on, never wait for a connection to be made.
        What cannot go over an open connection is kept locally (the Kafka spool) for the next
        start. The default does nothing."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release resources."""

    def health(self) -> dict[str, int]:
        """Counters worth reporting in the emitter's health record. The default has none."""
        return {}

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
