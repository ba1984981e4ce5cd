"""Source → validated Arrow batches → durable Parquet, exactly once.

Per partition of its source (a local log, or a Kafka consumer group's assignment) the ingester
decodes and checks each record into a buffer, flushes the buffer as Parquet files (on a writer
thread), commits them to the output with the offset after them (a Delta table's commit), and only
then commits that offset to the source. A partition assigned again resumes where the stored files
end, so a crash or a rebalance neither stores a record twice nor skips one; what the source no
longer has stops the run, naming it, unless ``accept_loss`` records it. docs/design.md ("Exactly
once into Parquet") tells the rest: orphaned buffers, refused commits, duplicate steps.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from specmetrics.ingest.batch import DUPLICATE_STEP, DeadLetter, PartitionBuffer
from specmetrics.ingest.observer import IngestObserver
from specmetrics.ingest.output import write_dead_letters, write_lost_range, write_partitioned
from specmetrics.ingest.recovery import recent_steps, resume_position
from specmetrics.ingest.settings import IngestSettings
from specmetrics.ingest.sources.base import LostRange, Source, SourceUnavailable, SourceWentBack
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.schemas.version import UnsupportedSchemaVersion
from specmetrics.schemas.wire import InvalidRecord, decode_step
from specmetrics.storage.files import WrittenFile, remove_written
from specmetrics.storage.layout import FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.parquet import ParquetOptions
from specmetrics.storage.table import CommitRefused, DataFile, Table, is_table

if TYPE_CHECKING:  # kafka-python is an optional dependency
    from specmetrics.ingest.dead_letter_topic import DeadLetterTopic

logger = logging.getLogger(__name__)

#: How often an observer is told the source's lag.
LAG_INTERVAL_S = 1.0


@dataclass
class IngestStats:
    """Running totals of one ingester (rows, dead letters, files: durable and committed)."""

    records: int = 0
    rows: int = 0
    dead_letters: int = 0
    files: int = 0
    flushes: int = 0
    redelivered: int = 0  # records at offsets already consumed (skipped)
    lost_offsets: int = 0  # offsets the source reported gone, recorded in the table (accept_loss)


class LostOffsets(ValueError):
    """Offsets are gone from the source and ``accept_loss`` is off: everything before them is
    stored and committed, and the run stops here."""

    def __init__(self, source: str, loss: LostRange) -> None:
        super().__init__(f"offsets {loss.first}-{loss.last} of source {source} partition {loss.partition} are lost: "
                         f"{loss.reason}; everything before them is stored. To record the loss in the table and go "
                         "on, run again with --accept-loss (SPECMETRICS_INGEST_ACCEPT_LOSS=1)")
        self.loss = loss


@dataclass(frozen=True, slots=True)
class _Flush:
    name: FileName
    table: pa.Table
    event_time_us: np.ndarray
    dead_letters: list[DeadLetter]
    first_event_us: int | None
    written: list[WrittenFile] = field(default_factory=list)  # filled by the writer thread
    data: list[DataFile] = field(default_factory=list)  # the data files of written, as the commit names them
    lost: LostRange | None = None  # a flush that records offsets gone from the source, and nothing else
    refused: list[CommitRefused] = field(default_factory=list)  # a table that refused the flush's commit


class Ingester:
    """Runs one source into one Delta table (a local folder or an S3 prefix)."""

    def __init__(self, source: Source, out: Path | S3Location, settings: IngestSettings | None = None,
                 dead_letter_topic: DeadLetterTopic | None = None, observer: IngestObserver | None = None) -> None:
        """``out``: the table's local folder or S3 prefix (made a table if new). ``observer`` is told
        of every step as soon as it is validated (after each poll), of offsets recorded lost, and of
        the source's lag (about once a second)."""
        self.source = source
        self._observer = observer
        self.out = out
        self.settings = settings or IngestSettings()
        self.stats = IngestStats()
        self._dead_letter_topic = dead_letter_topic
        self._options = ParquetOptions(
            compression=self.settings.compression,
            compression_level=self.settings.compression_level,
            row_group_rows=self.settings.row_group_rows,
        )
        self._next: dict[int, int] = {}  # per owned partition: the next offset to consume
        self._buffers: dict[int, PartitionBuffer] = {}
        self._refused: set[int] = set()  # partitions whose commit was refused: nothing is stored until reassigned
        self._rewound: dict[int, int] = {}  # partitions read again from this offset: records read before go
        self._owned: set[int] = set()  # partitions assigned to this ingester now
        self._read_at: dict[int, OrderedDict[str, int]] = {}  # per partition: recent steps' event id -> offset
        self._orphans: dict[int, PartitionBuffer] = {}  # buffers of partitions lost, until stored by someone
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specmetrics-writer")
        self._in_flight: tuple[Future[None], dict[int, int], _Flush] | None = None
        self._rotate_us = int(self.settings.flush_event_time_s * 1_000_000)
        self._max_ahead_us = int(self.settings.max_ahead_s * 1_000_000)
        self._max_behind_us = int(self.settings.max_behind_s * 1_000_000)
        #: Seconds this ingester has had work it does not do: waiting for its consumer group to hand out
        #: partitions, or holding partitions with records behind and reading none (updated about once a
        #: second by :meth:`run`); 0 while it keeps up.
        self.stalled_s = 0.0
        self._read_clock()
        self._table = _open_table(out)
        #: The source's name in the table's files and offsets: the name it claimed for the source.
        self.name = source.name if source.identity is None else self._table.claim(source.name, source.identity)
        source.listen(self._assigned, self._revoked, self._lost)

    def run(self, once: bool, progress: Callable[[IngestStats], None] | None = None,
            should_stop: Callable[[], bool] = lambda: False,
            alive: Callable[[IngestStats, float], None] | None = None) -> IngestStats:
        """Ingest until the end of the source (``once``) or until ``should_stop()``. ``alive`` is
        called on every pass of the loop, records or not (a live source is polled with a 0.5 s timeout),
        with the totals and :attr:`stalled_s`."""
        last_record = last_log = last_lag = time.monotonic()
        rows_at_log = 0
        while not should_stop():
            if alive:
                alive(self.stats, self.stalled_s)
            caught_up = once and self.source.at_end()
            try:
                records = self.source.poll(self.settings.poll_records, 0.0 if caught_up else 0.5)
            except SourceWentBack as went_back:
                raise self._store_before_stopping(went_back) from None
            except ValueError:  # the source refuses to go on (a segment of another log, say): keep what it gave
                self.flush_all()
                self.wait()
                raise
            losses = self.source.losses()
            for loss in losses:
                self._handle_lost_range(loss)
            self._read_clock()
            for record in records:
                self._consume(record.partition, record.offset, record.value, record.error)
            now = time.monotonic()
            if self._observer is not None:
                for partition in {record.partition for record in records}:
                    if buffer := self._buffers.get(partition):
                        buffer.convert()
            self._reap()
            if records or losses:
                last_record = now
                if progress:
                    progress(self.stats)
            elif caught_up:
                break
            elif now - last_record >= self.settings.flush_idle_s:
                self.flush_all()
            if now - last_lag >= LAG_INTERVAL_S:
                self._check_progress(now - last_record)
                last_lag = now
                if self.stalled_s > self.settings.max_stalled_s and not should_stop():
                    raise SourceUnavailable(f"{self.name} stalled for {self.stalled_s:.0f} s (limit "
                                            f"SPECMETRICS_INGEST_MAX_STALLED_S={self.settings.max_stalled_s:g}): its "
                                            "consumer group handed out no partitions, or records wait behind the "
                                            "partitions it holds; leaving the group to join it again")
            if now - last_log >= self.settings.log_interval_s:
                logger.info("ingest %s: %.0f rows/s, lag %s record(s), %d rows and %d dead letter(s) committed",
                            self.name, (self.stats.rows - rows_at_log) / (now - last_log), self.source.lag(),
                            self.stats.rows, self.stats.dead_letters)
                last_log, rows_at_log = now, self.stats.rows
        self.flush_all()
        self.wait()
        self._store_orphans_at_stop()
        if progress:
            progress(self.stats)
        return self.stats

    def _check_progress(self, idle_s: float) -> None:
        """Work out :attr:`stalled_s` (and tell the observer the lag and it): the time the source has
        waited for its group to hand out partitions, or, while a partition this ingester holds has
        records behind its position, the time since a record was read."""
        lags = self.source.partition_lag()
        self.stalled_s = max(self.source.rebalancing_s(), idle_s if any(lags.values()) else 0.0)
        if self._observer is not None:
            self._observer.lag(self.name, lags)
            self._observer.stalled(self.name, self.stalled_s)

    def _assigned(self, committed: dict[int, int | None]) -> dict[int, int | None]:
        self.wait()  # a flush in flight may be of a partition assigned again
        positions = {partition: self._resume_position(partition, offset) for partition, offset in committed.items()}
        self._owned.update(positions)
        orphans = {partition: self._orphans.pop(partition) for partition in positions if partition in self._orphans}
        self._drop_stored_orphans()
        for partition, stored_end in list(positions.items()):
            self._buffers.pop(partition, None)
            self._next.pop(partition, None)
            self._refused.discard(partition)
            orphan = orphans.get(partition)
            position = stored_end
            if orphan is not None and stored_end in (None, orphan.start_offset):
                # Nobody stored the partition since this ingester lost it: what it read is still the
                # next thing to store, and perhaps the only copy left (a broker that lost its data).
                logger.info("partition %d of %s is back: keeping offsets %d-%d read before it was lost",
                            partition, self.name, orphan.start_offset, orphan.end_offset)
                self._buffers[partition] = orphan
                positions[partition] = position = orphan.end_offset + 1
            elif self.settings.dedupe_steps:
                self._read_at[partition] = recent_steps(self._table, self.name, partition, self.settings.dedupe_steps)
            if position is not None:
                self._next[partition] = position
        return positions

    def _store_before_stopping(self, went_back: SourceWentBack) -> ValueError:
        """The error that stops the run when the source lost records this ingester read, after storing
        what it had read of every partition (now the only copy): how far the files reach."""
        self.flush_all()
        self.wait()
        kept = self._store_orphans()
        stored = self._next.get(went_back.partition, 0) - 1
        files = f"the files of partition {went_back.partition} reach offset {stored}" if stored >= 0 else \
            f"no file holds partition {went_back.partition}"
        unstored = f" (offsets {stored + 1}-{went_back.position - 1} were read but not stored)" \
            if went_back.position - 1 > stored else ""
        return ValueError(f"{went_back}; {files}{unstored}{kept}. Nothing was removed; ingest the new topic into a "
                          "new output directory with a new consumer group")

    def _resume_position(self, partition: int, committed: int | None = None) -> int | None:
        """Where to read the partition from, given its committed offset (:func:`resume_position`);
        with none, where its stored files end (None: nothing stored)."""
        return resume_position(self._table, self.name, partition, committed)

    def _drop_stored_orphans(self) -> None:
        """Orphans whose partition another ingester has stored past their start: theirs now."""
        for partition, orphan in list(self._orphans.items()):
            if self._resume_position(partition) not in (None, orphan.start_offset):
                del self._orphans[partition]

    def _store_orphans_at_stop(self) -> None:
        """Stopping with buffers of partitions this ingester lost: where the source now ends before
        the last record one holds (a broker that lost its data, with this ingester never assigned
        again), that buffer is the only copy left, and is stored. The others are their new owners'."""
        if not self._orphans:
            return
        ends = self.source.ends(sorted(self._orphans))
        gone = [p for p, orphan in self._orphans.items() if ends is not None and ends.get(p, 0) <= orphan.end_offset]
        if gone:
            logger.warning("partitions %s of %s end before what this ingester read of them (offsets %s) when it "
                           "stops: the source lost them", sorted(gone), self.name,
                           {p: (self._orphans[p].start_offset, self._orphans[p].end_offset) for p in sorted(gone)})
            if kept := self._store_orphans(gone):
                logger.warning("%s", kept.removeprefix("; "))
        elif ends is None:
            logger.warning("stopping with offsets %s of %s read but not stored, of partitions this ingester lost: "
                           "left to their new owners (where the source ends could not be asked)",
                           {p: (o.start_offset, o.end_offset) for p, o in sorted(self._orphans.items())},
                           self.name)
        self._orphans.clear()

    def _store_orphans(self, partitions: list[int] | None = None) -> str:
        """The source lost records: what this ingester read of partitions it lost before (of
        ``partitions``; None: all) may be the only copy left. Each one nobody stored since is stored
        (its commit may be refused); says which."""
        stored = []
        for partition, orphan in sorted(self._orphans.items()):
            if partitions is not None and partition not in partitions:
                continue
            if self._resume_position(partition) in (None, orphan.start_offset):
                self._buffers[partition] = orphan
                self.flush(partition)
                self.wait()
                stored.append(f"partition {partition} offsets {orphan.start_offset}-{orphan.end_offset}")
        self._orphans.clear()
        return f"; stored what was read before this ingester lost them: {', '.join(stored)}" if stored else ""

    def _revoked(self, partitions: list[int]) -> None:
        # No longer owned before the flushes: one whose commit is refused is not sought again (its next
        # owner reads on from where the table ends, and kafka-python allows no seek in this callback).
        self._owned.difference_update(partitions)
        for partition in partitions:
            self.flush(partition)
        self.wait()
        self._forget(partitions)

    def _lost(self, partitions: list[int]) -> None:
        """Evicted: what is not committed of these partitions is their new owner's to store. Buffers
        are kept aside unwritten, and taken up again if the partition comes back with nothing stored
        since (:meth:`_assigned`); a flush of theirs in flight is committed to the table or refused by it
        (when the new owner committed first), and its offsets are not committed to the source."""
        logger.warning("lost partitions %s of %s (this ingester was evicted from its group); what it had not "
                       "committed of them is kept aside unwritten, for their new owner to store, or this ingester "
                       "if they come back", partitions, self.name)
        self._orphans.update((p, self._buffers[p]) for p in partitions if p in self._buffers)
        self._owned.difference_update(partitions)
        self._forget(partitions)
        if self._in_flight is not None and not self._in_flight[1].keys().isdisjoint(partitions):
            (future, _, _), self._in_flight = self._in_flight, None
            future.exception()  # waits; its commit is made (the new owner's then) or its files are gone

    def _forget(self, partitions: list[int]) -> None:
        for partition in partitions:
            self._buffers.pop(partition, None)
            self._next.pop(partition, None)
            self._refused.discard(partition)
            self._rewound.pop(partition, None)

    def _consume(self, partition: int, offset: int, payload: bytes, error: str | None = None) -> None:
        if partition in self._refused:
            return
        if partition in self._rewound:
            if offset != self._rewound[partition]:  # polled before the source was sought back
                self.stats.redelivered += 1
                return
            del self._rewound[partition]
        buffer = self._buffers.get(partition)
        expected = buffer.end_offset + 1 if buffer else self._next.get(partition, offset)
        if offset < expected:
            self.stats.redelivered += 1
            return
        self.stats.records += 1
        try:
            if error is not None:
                raise InvalidRecord(error)
            step = decode_step(payload)
            if not self._earliest_us <= step.event_time_us <= self._latest_us:
                raise InvalidRecord(self._far_from_clock(step.event_time_us))
            if self.settings.dedupe_steps and self._read_before(partition, offset, step.event_id):
                raise InvalidRecord(DUPLICATE_STEP)
        except (InvalidRecord, UnsupportedSchemaVersion) as exc:
            if buffer is None:
                buffer = self._buffers[partition] = self._new_buffer(partition, offset)
            buffer.reject(offset, payload, str(exc))
        else:
            # Forward only: engines whose clocks differ by more than the window, or a replayed spool
            # next to live steps, must not cut a file at every record.
            if buffer is not None and buffer.first_event_us is not None and \
                    step.event_time_us - buffer.first_event_us >= self._rotate_us:
                self.flush(partition)
                buffer = None
            if buffer is None:
                buffer = self._buffers[partition] = self._new_buffer(partition, offset)
            buffer.add(offset, payload, step)
        if buffer.rows + len(buffer.dead_letters) >= self.settings.flush_rows or \
                buffer.payload_bytes >= self.settings.flush_bytes:
            self.flush(partition)

    def _read_before(self, partition: int, offset: int, event_id: str) -> bool:
        """Whether a step with this event id was read at another offset of the partition, among the
        last ``dedupe_steps`` steps read there (a record read again at its own offset is not a copy)."""
        read_at = self._read_at.setdefault(partition, OrderedDict())
        first = read_at.get(event_id)
        if first is not None:
            return first != offset
        read_at[event_id] = offset
        if len(read_at) > self.settings.dedupe_steps:
            read_at.popitem(last=False)
        return False

    def _read_clock(self) -> None:
        """The event times this poll's steps may have (settings max_ahead_s and max_behind_s, 0: no
        bound), from the clock read once per poll rather than per record."""
        self._clock_us = time.time_ns() // 1000
        self._earliest_us = self._clock_us - self._max_behind_us if self._max_behind_us else -(2**63)
        self._latest_us = self._clock_us + self._max_ahead_us if self._max_ahead_us else 2**63

    def _far_from_clock(self, event_time_us: int) -> str:
        """Why a step dated implausibly far from this ingester's clock is refused, naming both times:
        stored, it would sit in a folder of its own far from the others, and every window of the
        reports would stretch to it."""
        if event_time_us > self._latest_us:
            bound, side = "SPECMETRICS_INGEST_MAX_AHEAD_S", "ahead of"
        else:
            bound, side = "SPECMETRICS_INGEST_MAX_BEHIND_S", "behind"
        delta = abs(event_time_us - self._clock_us) / 1e6
        return (f"event time {_iso(event_time_us)} is {delta:,.0f} s {side} the ingester's clock "
                f"({_iso(self._clock_us)}), more than {bound} allows")

    def _new_buffer(self, partition: int, offset: int) -> PartitionBuffer:
        return PartitionBuffer(partition, offset, observer=self._observer, source=self.name)

    def _handle_lost_range(self, loss: LostRange) -> None:
        """Offsets gone from the source: what came before them is flushed and committed; then the
        run stops, or (``accept_loss``) the range gets a file of its own and is committed."""
        if loss.partition in self._refused:
            return
        buffer = self._buffers.get(loss.partition)
        if loss.last < (buffer.end_offset + 1 if buffer else self._next.get(loss.partition, loss.first)):
            return  # before what was consumed already
        self.flush(loss.partition)
        self.wait()
        if not self.settings.accept_loss:
            raise LostOffsets(self.name, loss)
        self._submit(_Flush(FileName(self.name, loss.partition, loss.first, loss.last, self._attempt()),
                            REQUEST_STEP_SCHEMA.empty_table(), np.zeros(0, dtype=np.int64), [], None, lost=loss))
        self.wait()
        if self._observer is not None:
            self._observer.lost(self.name, loss.partition, loss.first, loss.last)

    def flush_all(self) -> None:
        for partition in list(self._buffers):
            self.flush(partition)

    def flush(self, partition: int) -> None:
        """Hand everything buffered for ``partition`` to the writer thread, which makes it
        durable; the commit past it follows in :meth:`wait`. One flush is in flight at a time."""
        buffer = self._buffers.pop(partition, None)
        if buffer is None:
            return
        name = FileName(self.name, partition, buffer.start_offset, buffer.end_offset, self._attempt())
        table, event_time_us = buffer.build()
        self.wait()
        if partition in self._refused or partition in self._rewound:
            return  # the commit of its previous flush was refused just now
        self._submit(_Flush(name, table, event_time_us, buffer.dead_letters, buffer.first_event_us))

    def _submit(self, work: _Flush) -> None:
        """Hand the flush to the writer thread; :meth:`wait` commits its offsets to the source."""
        self._in_flight = (self._writer.submit(self._write, work), {work.name.partition: work.name.end + 1}, work)

    def wait(self) -> None:
        """Block until the flush in flight is durable, then commit it; re-raise its error."""
        if self._in_flight is not None:
            (future, next_offsets, work), self._in_flight = self._in_flight, None
            future.result()
            if not self._commit_to_table(work):
                return
            if not self.source.commit(next_offsets):  # stored all the same: the table's log is the truth
                self._stop_storing(next_offsets, "the flush is committed to the table")
            if work.name.partition not in self._refused:
                self._next.update(next_offsets)
            self.stats.files += len(work.data)
            self.stats.rows += work.table.num_rows
            self.stats.dead_letters += len(work.dead_letters)
            self.stats.lost_offsets += work.name.end - work.name.start + 1 if work.lost else 0
            self.stats.flushes += 1

    def close(self) -> None:
        """Wait for the last flush and stop the writer thread (buffers are not flushed)."""
        try:
            self.wait()
        finally:
            self._writer.shutdown()
            if self._dead_letter_topic is not None:
                self._dead_letter_topic.close()

    @staticmethod
    def _attempt() -> str:
        """A flush's own token in its file names (see storage.table)."""
        return os.urandom(6).hex()

    def _commit_to_table(self, work: _Flush) -> bool:
        """Whether the table took the flush's commit (made by the writer thread). Refused (another
        writer committed the partition past where the flush starts), the flush's files are gone and
        the partition is read again from where the table says it ends."""
        if not work.refused:
            return True
        refused = work.refused[0]
        partition = work.name.partition
        self._forget([partition])
        if partition in self._owned:  # not a partition lost before, whose buffer was the only copy
            if refused.position is not None:
                self._next[partition] = self._rewound[partition] = refused.position
            self.source.seek({partition: refused.position})
        logger.warning("%s; the flush's files removed, reading the partition again from offset %s", refused,
                       refused.position)
        return False

    def _stop_storing(self, next_offsets: dict[int, int], outcome: str) -> None:
        """Store nothing more of these partitions until they are assigned again: the group refused their commit."""
        self._forget(list(next_offsets))
        self._refused.update(next_offsets)
        logger.warning("the group refused the commit of %s (this ingester was evicted, or the group is rebalancing); "
                       "%s", next_offsets, outcome)

    def _reap(self) -> None:
        """Commit the flush in flight if it is done, without waiting."""
        if self._in_flight is not None and self._in_flight[0].done():
            self.wait()

    def _write(self, work: _Flush) -> None:
        """Write the flush's files durably, and commit them to the table (here, beside the polling
        thread: a commit reads and writes the table's log)."""
        self._write_files(work)
        try:
            self._table.commit(work.name, work.data)
        except CommitRefused as refused:
            remove_written(work.written)
            work.refused.append(refused)

    def _write_files(self, work: _Flush) -> None:
        if work.lost is not None or not work.table.num_rows:
            # Every commit names a data file of the flush's offsets: it is what makes them stored.
            at_us = work.first_event_us if work.first_event_us is not None else time.time_ns() // 1000
            self._write_data(work, at_us)
        if work.lost is not None:
            letters = write_lost_range(self.out, work.name, work.lost.reason)
            work.written.append(letters)
            logger.warning("offsets %d-%d of %s partition %d are lost (%s); recorded in %s", work.name.start,
                           work.name.end, work.name.source, work.name.partition, work.lost.reason, letters.relative)
            return
        letter_files = 1 if work.dead_letters else 0
        if work.table.num_rows:
            self._write_data(work, work.first_event_us, other_files=letter_files)
        if work.dead_letters:
            flush_files = len(work.written) + 1
            work.written.append(write_dead_letters(self.out, work.name, work.dead_letters, flush_files))
            for letter in work.dead_letters:
                logger.warning("dead letter at %s partition %d offset %d: %s",
                               work.name.source, letter.partition, letter.offset, letter.reason)
            if self._dead_letter_topic is not None:
                self._dead_letter_topic.publish(self._dead_letter_topic.address.topic, work.dead_letters)

    def _write_data(self, work: _Flush, empty_at_us: int | None, other_files: int = 0) -> None:
        for written, data in write_partitioned(self.out, work.name, work.table, work.event_time_us, self._options,
                                               empty_at_us, other_files):
            work.written.append(written)
            work.data.append(data)


def _open_table(out: Path | S3Location) -> Table:
    """The table in ``out``, created where there is none yet. A folder of Parquet files that is not
    a table (a tree an older specmetrics wrote) is refused, naming the conversion."""
    if isinstance(out, Path) and not is_table(out) and any(out.glob("dt=*")):
        raise ValueError(f"{out} holds a tree of Parquet files, not a Delta table: 'specmetrics table convert {out}' "
                         "makes it a table, which ingest then writes")
    return Table(out, create=True)


def _iso(time_us: int) -> str:
    """A UTC time in microseconds since the epoch, as ISO 8601 (any the contract admits)."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=time_us)).isoformat()
