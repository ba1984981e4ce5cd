"""A Kafka topic as a source: one member of a consumer group, committing offsets by hand."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

from emitter.kafka import KafkaAddress, KafkaSettings, ensure_topic
from ingest.durable import fsync_dir, write_atomically
from ingest.sources.base import OnAssigned, OnLost, OnRevoked, Source, SourceRecord

logger = logging.getLogger(__name__)


class KafkaSource(Source):
    """Subscribes to the topic in consumer group ``group``. Offsets are committed only by
    :meth:`commit` (never automatically); a new group starts at the earliest offset.

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
        _claim_output(state_dir / f"{self.name}.group", group)
        ensure_topic(address, self.settings)
        self._consumer = KafkaConsumer(
            bootstrap_servers=list(address.bootstrap_servers),
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=self.settings.session_timeout_ms,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
            max_poll_records=100_000,
            **self.settings.client_config(),
        )
        self._joined = False
        self._newly_assigned: set[TopicPartition] | None = None
        self._in_rebalance = False
        self._assigned: OnAssigned = lambda committed: None
        self._revoked: OnRevoked = lambda partitions: None
        self._lost: OnLost = lambda partitions: None
        self._consumer.subscribe([address.topic], listener=_Listener(self))

    def listen(self, assigned: OnAssigned, revoked: OnRevoked, lost: OnLost) -> None:
        self._assigned, self._revoked, self._lost = assigned, revoked, lost

    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        batches = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        if self._newly_assigned is not None:
            assigned, self._newly_assigned = self._newly_assigned, None
            self._assigned({tp.partition: self._committed(tp) for tp in assigned})
            logger.info("assigned partitions %s of %s", sorted(tp.partition for tp in assigned), self.address.topic)
        return [SourceRecord(tp.partition, r.offset, r.value) for tp, records in batches.items() for r in records]

    def committed(self) -> dict[int, int]:
        return {tp.partition: self._committed(tp) for tp in self._consumer.assignment()}

    def commit(self, next_offsets: dict[int, int]) -> bool:
        offsets = {TopicPartition(self.address.topic, p): OffsetAndMetadata(o, "", -1) for p, o in next_offsets.items()}
        if self._in_rebalance:
            self._consumer.commit_async(offsets, callback=_log_failed_commit)
            return True
        try:
            self._consumer.commit(offsets)
        except (CommitFailedError, RebalanceInProgressError):
            return False
        return True

    def at_end(self) -> bool:
        if not self._joined or self._newly_assigned is not None:
            return False
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is None or self._consumer.position(tp) < highwater:
                return False
        return True

    def lag(self) -> int | None:
        total = 0
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            if highwater is None:
                return None
            total += max(0, highwater - self._consumer.position(tp))
        return total

    def close(self) -> None:
        try:
            self._consumer.close(autocommit=False)
        except KafkaError:
            logger.debug("closing the consumer failed", exc_info=True)

    def _committed(self, tp: TopicPartition) -> int:
        offset = self._consumer.committed(tp)
        return 0 if offset is None else int(offset)


def _log_failed_commit(offsets: dict[TopicPartition, OffsetAndMetadata], response: object) -> None:
    if isinstance(response, Exception):
        # Sent while the partitions are revoked, before the rejoin: their new owner is assigned
        # them after this file is durable, and removes and rewrites everything past their last commit.
        logger.warning("commit of %s failed (%s); the new owner rewrites past the last commit",
                       {tp.partition: o.offset for tp, o in offsets.items()}, response)


def _claim_output(marker: Path, group: str) -> None:
    """One output tree belongs to one consumer group: its committed offsets say which files
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
        if revoked:
            self.source._in_rebalance = True
            try:
                self.source._revoked(sorted(tp.partition for tp in revoked))
            finally:
                self.source._in_rebalance = False

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # kafka-python's default treats them as revoked: the ingester would write (and try to
        # commit) data that the partitions' new owner may have stored already.
        if lost:
            self.source._lost(sorted(tp.partition for tp in lost))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.source._joined = True
        self.source._newly_assigned = set(assigned)
