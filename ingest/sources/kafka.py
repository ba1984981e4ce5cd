"""A Kafka topic as a source: one member of a consumer group, committing offsets by hand."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import CommitFailedError, KafkaError, OffsetOutOfRangeError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

from specmetrics.ingest.sources.base import (
    OnAssigned,
    OnLost,
    OnRevoked,
    Source,
    SourceRecord,
    SourceUnavailable,
    SourceWentBack,
)
from specmetrics.storage.durable import fsync_dir, write_atomically
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings, cluster_id, ensure_topic

logger = logging.getLogger(__name__)

#: How long a fetch that checks whether the broker still holds a record may take.
PROBE_WAIT_S = 5.0
#: How long a fetch's proof that the broker held a partition's last record read is trusted.
PROBE_INTERVAL_S = 2.0

#: The dead-letter reason of a record without a value.
TOMBSTONE = "a Kafka tombstone (a message without a value), not a step message"


class KafkaSource(Source):
    """Subscribes to the topic in consumer group ``group``. Offsets are committed only by
    :meth:`commit` (never automatically). Where an assigned partition is read from is the
    ingester's to say (from the stored files; the earliest offset for a new tree): the
    consumer never resets a position by itself, and an offset the topic does not hold (behind
    its first offset, past its end) is an error. A failure to reach the brokers is raised as
    :class:`~ingest.sources.base.SourceUnavailable`.

    kafka-python runs rebalance callbacks on its network thread, where no blocking consumer
    call is allowed. So a revocation is handled there (the ingester flushes; the commit is
    sent asynchronously, ahead of the rejoin), and an assignment is only noted there and
    handed to the ingester on the polling thread, before any record of it. A member that was
    evicted (its session expired) learns it when it rejoins: its partitions are reported lost,
    not revoked, since their new owner may have read and stored them already.
    """

    def __init__(self, address: KafkaAddress, group: str, state_dir: Path,
                 settings: KafkaSettings | None = None) -> None:
        self.address = address
        self.settings = settings or KafkaSettings()
        self.name = address.file_prefix
        self._timeout_ms = int(self.settings.request_timeout_s * 1000)
        _claim_output(state_dir / f"{self.name}.group", group)
        with self._unavailable():
            ensure_topic(address, self.settings)
            cluster = cluster_id(address, self.settings)
            self._consumer = self._connect(group)
        # Two clusters may each hold a topic of this name: a table keeps each one's offsets apart.
        self.identity = None if cluster is None else f"kafka topic {address.topic} of cluster {cluster}"
        self._joined = False
        self._rebalancing_since: float | None = time.monotonic()  # waiting for the group's assignment since
        self._probe: KafkaConsumer | None = None  # reads single records outside the group (_holds)
        self._held: dict[TopicPartition, float] = {}  # per partition: when a fetch last proved the broker held it
        self._newly_assigned: set[TopicPartition] | None = None
        self._in_rebalance = False
        self._assigned: OnAssigned = lambda committed: {}
        self._revoked: OnRevoked = lambda partitions: None
        self._lost: OnLost = lambda partitions: None
        self._consumer.subscribe([address.topic], listener=_Listener(self))

    def _connect(self, group: str) -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=list(self.address.bootstrap_servers),
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="none",
            session_timeout_ms=self.settings.session_timeout_ms,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            group_instance_id=self.settings.group_instance_id,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
            max_poll_records=100_000,
            **self.settings.client_config(),
        )

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        """Kafka client errors as one line that names the brokers and topic (never credentials)."""
        try:
            yield
        except KafkaError as exc:
            detail = str(exc) if str(exc) not in ("", "None") else f"no answer within {self._timeout_ms / 1000:g} s"
            what = detail if detail.startswith(type(exc).__name__) else f"{type(exc).__name__}: {detail}"
            raise SourceUnavailable(f"Kafka at {','.join(self.address.bootstrap_servers)} (topic "
                                    f"{self.address.topic}) failed: {what}") from exc

    def listen(self, assigned: OnAssigned, revoked: OnRevoked, lost: OnLost) -> None:
        self._assigned, self._revoked, self._lost = assigned, revoked, lost

    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        with self._unavailable():
            try:
                batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
            except OffsetOutOfRangeError as exc:
                raise ValueError(f"the topic {self.address.topic} does not hold the offsets to read next "
                                 f"({_partition_offsets(exc)}): its records were deleted before they were stored, "
                                 "or the topic was recreated. Nothing was removed") from None
            if self._newly_assigned is not None:
                assigned, self._newly_assigned = self._newly_assigned, None
                self.seek(self._assigned({tp.partition: self._committed(tp) for tp in assigned}))
                self._consumer.resume(*assigned)
                logger.info("assigned partitions %s of %s", sorted(tp.partition for tp in assigned),
                            self.address.topic)
                batches = {tp: records for tp, records in batches.items() if tp not in assigned}
            self._check_positions()
        return [SourceRecord(tp.partition, r.offset, r.value) if r.value is not None
                else SourceRecord(tp.partition, r.offset, b"", TOMBSTONE)
                for tp, records in batches.items() for r in records]

    def seek(self, positions: dict[int, int | None]) -> None:
        partitions = {p: TopicPartition(self.address.topic, p) for p in positions}
        with self._unavailable():
            first = self._consumer.beginning_offsets(list(partitions.values()), timeout_ms=self._timeout_ms)
        for partition, position in positions.items():
            tp = partitions[partition]
            if position is None:
                self._consumer.seek(tp, first[tp])
            elif position < first[tp]:
                raise ValueError(f"partition {partition} of topic {self.address.topic}: offsets {position}-"
                                 f"{first[tp] - 1} were deleted from the topic before they were stored (its first "
                                 f"offset is {first[tp]}; the stored files end at {position})")
            else:
                self._consumer.seek(tp, position)

    def _check_positions(self) -> None:
        """A position past the end of the topic: the broker holds fewer records than were read
        and stored (the topic was recreated, or the broker lost its data). The broker may not
        say so (Tansu answers such a fetch with nothing), but it reports its end offset. That
        report alone is not proof: Tansu reports the end of a partition whose last batch holds
        several records as short of it while the records are there. So a fetch of the last
        record read decides (:meth:`_holds`), at most once per :data:`PROBE_INTERVAL_S` per partition."""
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is None or tp in self._consumer.paused():
                continue
            position = self._consumer.position(tp, timeout_ms=self._timeout_ms)
            if position <= highwater or time.monotonic() - self._held.get(tp, -PROBE_INTERVAL_S) < PROBE_INTERVAL_S:
                continue
            if not self._holds(tp, position - 1):
                raise SourceWentBack(f"topic {self.address.topic}", tp.partition, highwater, position)

    def _holds(self, tp: TopicPartition, offset: int) -> bool:
        """Whether the broker still holds the record at ``offset``, from a fetch of it by a consumer
        outside the group. False only when the fetch proves it gone (offset out of range, or an
        answer without it from a broker that reports its end at or before it); a broker that does
        not answer (paused, overloaded) is not taken for one that lost its data: True, asked again
        at the next check."""
        try:
            if self._probe is None:
                self._probe = KafkaConsumer(bootstrap_servers=list(self.address.bootstrap_servers), group_id=None,
                                            enable_auto_commit=False, auto_offset_reset="none",
                                            **self.settings.client_config())
            self._probe.assign([tp])
            self._probe.seek(tp, offset)
            deadline = time.monotonic() + PROBE_WAIT_S
            while time.monotonic() < deadline:
                records = self._probe.poll(timeout_ms=200, max_records=1).get(tp, [])
                if any(record.offset >= offset for record in records):
                    self._held[tp] = time.monotonic()
                    return True
                end = self._probe.highwater(tp)
                if end is not None and end <= offset and not records:
                    logger.warning("partition %d of %s: a fetch of offset %d found nothing, and the broker says the "
                                   "partition ends at %d", tp.partition, self.address.topic, offset, end)
                    return False
        except OffsetOutOfRangeError:
            return False
        except KafkaError:
            logger.warning("could not fetch offset %d of partition %d of %s to check the broker still holds it",
                           offset, tp.partition, self.address.topic, exc_info=True)
        return True

    def committed(self) -> dict[int, int | None]:
        with self._unavailable():
            return {tp.partition: self._committed(tp) for tp in self._consumer.assignment()}

    def commit(self, next_offsets: dict[int, int]) -> bool:
        offsets = {TopicPartition(self.address.topic, p): OffsetAndMetadata(o, "", -1) for p, o in next_offsets.items()}
        if self._in_rebalance:
            self._consumer.commit_async(offsets, callback=_log_failed_commit)
            return True
        with self._unavailable():
            try:
                self._consumer.commit(offsets, timeout_ms=self._timeout_ms)
            except (CommitFailedError, RebalanceInProgressError):
                return False
        return True

    def at_end(self) -> bool:
        if not self._joined or self._newly_assigned is not None:
            return False
        with self._unavailable():
            for tp in self._consumer.assignment():
                highwater = self._consumer.highwater(tp)
                if highwater is None or self._consumer.position(tp, timeout_ms=self._timeout_ms) < highwater:
                    return False
        return True

    def rebalancing_s(self) -> float:
        since = self._rebalancing_since
        return 0.0 if since is None else time.monotonic() - since

    def lag(self) -> int | None:
        total = 0
        with self._unavailable():
            for tp in self._consumer.assignment():
                highwater = self._consumer.highwater(tp)
                if highwater is None:
                    return None
                total += max(0, highwater - self._consumer.position(tp, timeout_ms=self._timeout_ms))
        return total

    def partition_lag(self) -> dict[int, int]:
        lags: dict[int, int] = {}
        with self._unavailable():
            for tp in self._consumer.assignment():
                highwater = self._consumer.highwater(tp)
                if highwater is not None:
                    lags[tp.partition] = max(0, highwater - self._consumer.position(tp, timeout_ms=self._timeout_ms))
        return lags

    def ends(self, partitions: list[int]) -> dict[int, int] | None:
        """From fetches, not ListOffsets: Tansu answers a ListOffsets for the latest offset with less
        than the partition's end (1 for a partition of 8 records), a fetch response with its end. A
        consumer outside the group fetches each partition from its start once."""
        tps = [TopicPartition(self.address.topic, p) for p in partitions]
        probe: KafkaConsumer | None = None
        try:
            probe = KafkaConsumer(bootstrap_servers=list(self.address.bootstrap_servers), group_id=None,
                                  enable_auto_commit=False, auto_offset_reset="earliest",
                                  **self.settings.client_config())
            probe.assign(tps)
            for tp in tps:
                probe.seek(tp, 0)
            deadline = time.monotonic() + self._timeout_ms / 1000
            while any(probe.highwater(tp) is None for tp in tps) and time.monotonic() < deadline:
                probe.poll(timeout_ms=100, max_records=1)
            ends = {tp.partition: probe.highwater(tp) for tp in tps}
        except KafkaError:
            logger.warning("could not ask Kafka where partitions %s of %s end", partitions, self.address.topic,
                           exc_info=True)
            return None
        finally:
            if probe is not None:
                probe.close(autocommit=False)
        if any(end is None for end in ends.values()):
            return None
        return {partition: int(end) for partition, end in ends.items() if end is not None}

    def close(self) -> None:
        """Leave the group; with ``leave_group_on_close`` off, without a LeaveGroup request: the group
        hands this member's partitions on when its session times out. A LeaveGroup from the member
        that a forming group chose as its leader leaves the test broker's group (Tansu 0.6) without a
        leader for good: no member, old or new, is handed a partition again (seen with plain
        kafka-python consumers: ``benchmarks/bench_chaos.py --plain``). The ingester is done: a
        revocation on the way out has nothing to flush."""
        self.listen(lambda committed: {}, lambda partitions: None, lambda partitions: None)
        coordinator = getattr(self._consumer, "_coordinator", None)
        if not self.settings.leave_group_on_close and coordinator is not None:
            coordinator.reset_generation()  # kafka-python sends no LeaveGroup for a member without a generation
        for consumer in (self._consumer, self._probe):
            try:
                if consumer is not None:
                    consumer.close(autocommit=False, timeout_ms=self._timeout_ms)
            except KafkaError:
                logger.debug("closing a consumer failed", exc_info=True)

    def _committed(self, tp: TopicPartition) -> int | None:
        offset = self._consumer.committed(tp, timeout_ms=self._timeout_ms)
        return None if offset is None else int(offset)


def _partition_offsets(error: OffsetOutOfRangeError) -> str:
    """``partition p offset o`` for each partition the error names."""
    named = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
    return ", ".join(f"partition {tp.partition} offset {offset}" for tp, offset in named.items()) or str(error)


def _log_failed_commit(offsets: dict[TopicPartition, OffsetAndMetadata], response: object) -> None:
    if isinstance(response, Exception):
        # Sent while the partitions are revoked, before the rejoin: their new owner is assigned
        # them after the flush's files are durable, and resumes where those files end.
        logger.warning("commit of %s failed (%s); the new owner resumes after the stored files",
                       {tp.partition: o.offset for tp, o in offsets.items()}, response)


def _claim_output(marker: Path, group: str) -> None:
    """One output belongs to one consumer group: its committed offsets say which files
    are complete, so another group's (or none) would make the ingester remove good files.
    The first ingester to start claims it (a hard link: atomic, first one wins)."""
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        tmp = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
        write_atomically(tmp, group.encode())
        try:
            os.link(tmp, marker)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        fsync_dir(marker.parent)
    owner = marker.read_text().strip()
    if owner != group:
        raise ValueError(f"{marker.parent.parent} holds the output of consumer group {owner!r}, not {group!r}: "
                         "use that group or another output directory")


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Runs on kafka-python's network thread, while the polling thread waits in ``poll``."""

    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._rebalance_starts()  # called at the start of every rebalance, with what this member held (maybe nothing)
        if revoked:
            self.source._in_rebalance = True
            try:
                self.source._revoked(sorted(tp.partition for tp in revoked))
            finally:
                self.source._in_rebalance = False

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # kafka-python's default treats them as revoked: the ingester would write (and try to
        # commit) data that the partitions' new owner may have stored already.
        self._rebalance_starts()
        if lost:
            self.source._lost(sorted(tp.partition for tp in lost))

    def _rebalance_starts(self) -> None:
        if self.source._rebalancing_since is None:
            self.source._rebalancing_since = time.monotonic()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        # Paused at a placeholder position until the polling thread seeks them where the
        # stored files end: without a position, the consumer would look up (and reset) one itself.
        for tp in assigned:
            self.source._consumer.seek(tp, 0)
        self.source._consumer.pause(*assigned)
        self.source._joined = True
        self.source._rebalancing_since = None
        self.source._newly_assigned = set(assigned)
