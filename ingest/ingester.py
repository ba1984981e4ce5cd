"""Source → validated Arrow batches → durable Parquet, exactly once.

For each partition the ingester buffers decoded steps, and on flush writes the Parquet
files and the dead letters of that offset range durably, then commits the offset after it.
A crash between the two leaves files past the committed offset, which the next start
removes (``remove_uncommitted``) and rewrites under the same names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ingest.batch import DeadLetter, PartitionBuffer
from ingest.output import (
    FileName,
    ParquetOptions,
    remove_uncommitted,
    write_dead_letters,
    write_partitioned,
)
from ingest.settings import IngestSettings
from ingest.sources.base import Source
from schemas.version import UnsupportedSchemaVersion
from schemas.wire import InvalidRecord, decode_step

logger = logging.getLogger(__name__)


@dataclass
class IngestStats:
    """Running totals of one ingester (rows, dead letters, files: durable and committed)."""

    records: int = 0
    rows: int = 0
    dead_letters: int = 0
    files: int = 0
    flushes: int = 0


class Ingester:
    """Runs one source into one output directory."""

    def __init__(self, source: Source, out: Path, settings: IngestSettings | None = None) -> None:
        self.source = source
        self.out = out
        self.settings = settings or IngestSettings()
        self.stats = IngestStats()
        self._options = ParquetOptions(
            compression=self.settings.compression,
            compression_level=self.settings.compression_level,
            row_group_rows=self.settings.row_group_rows,
        )
        self._next = dict(source.committed())
        remove_uncommitted(out, source.name, self._next)
        self._buffers: dict[int, PartitionBuffer] = {}
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specmetrics-writer")
        self._in_flight: Future[None] | None = None

    def run(self, once: bool, progress: Callable[[IngestStats], None] | None = None,
            should_stop: Callable[[], bool] = lambda: False) -> IngestStats:
        """Ingest until the end of the source (``once``) or until ``should_stop()``."""
        last_record = time.monotonic()
        while not should_stop():
            records = self.source.poll(self.settings.poll_records, 0.0 if once else 0.5)
            for record in records:
                self._consume(record.partition, record.offset, record.value)
            if records:
                last_record = time.monotonic()
                if progress:
                    progress(self.stats)
            elif once:
                break
            elif time.monotonic() - last_record >= self.settings.flush_idle_s:
                self.flush_all()
        self.flush_all()
        self.wait()
        if progress:
            progress(self.stats)
        return self.stats

    def _consume(self, partition: int, offset: int, payload: bytes) -> None:
        buffer = self._buffers.get(partition)
        if buffer is None:
            buffer = self._buffers[partition] = PartitionBuffer(partition, offset)
        self.stats.records += 1
        try:
            buffer.add(offset, payload, decode_step(payload))
        except (InvalidRecord, UnsupportedSchemaVersion) as exc:
            buffer.reject(offset, payload, str(exc))
        if buffer.rows >= self.settings.flush_rows or buffer.payload_bytes >= self.settings.flush_bytes:
            self.flush(partition)

    def flush_all(self) -> None:
        for partition in list(self._buffers):
            self.flush(partition)

    def flush(self, partition: int) -> None:
        """Hand everything buffered for ``partition`` to the writer thread, which makes it
        durable and then commits past it. One flush is in flight at a time."""
        buffer = self._buffers.pop(partition, None)
        if buffer is None:
            return
        name = FileName(self.source.name, partition, buffer.start_offset, buffer.end_offset)
        table, event_time_us = buffer.build()
        self._next[partition] = buffer.end_offset + 1
        self.wait()
        self._in_flight = self._writer.submit(
            self._write_and_commit, name, table, event_time_us, buffer.dead_letters, dict(self._next)
        )

    def wait(self) -> None:
        """Block until the flush in flight is durable and committed; re-raise its error."""
        if self._in_flight is not None:
            in_flight, self._in_flight = self._in_flight, None
            in_flight.result()

    def close(self) -> None:
        """Wait for the last flush and stop the writer thread (buffers are not flushed)."""
        try:
            self.wait()
        finally:
            self._writer.shutdown()

    def _write_and_commit(self, name: FileName, table: pa.Table, event_time_us: np.ndarray,
                          dead_letters: list[DeadLetter], next_offsets: dict[int, int]) -> None:
        if table.num_rows:
            self.stats.files += len(write_partitioned(self.out, name, table, event_time_us, self._options))
        if dead_letters:
            write_dead_letters(self.out, name, dead_letters)
            for letter in dead_letters:
                logger.warning("dead letter at %s partition %d offset %d: %s",
                               name.source, letter.partition, letter.offset, letter.reason)
        self.source.commit(next_offsets)
        self.stats.rows += table.num_rows
        self.stats.dead_letters += len(dead_letters)
        self.stats.flushes += 1
