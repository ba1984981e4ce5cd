"""The embedded local log as a sink: every ``send`` is one fsynced batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specmetrics.emitter.sinks.base import Sink
from specmetrics.transport.log import LocalLogWriter


class LocalLogSink(Sink):
    def __init__(self, directory: Path | str) -> None:
        self._writer = LocalLogWriter(directory)

    def send(self, key: bytes, messages: Sequence[bytes]) -> None:
        if messages:
            self._writer.append(messages)

    def close(self) -> None:
        self._writer.close()
