"""What a consumer group's bad day must not be taken for: a stale end of a partition is not a
broker that lost its data."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from ingest.sources.base import SourceRecord, SourceWentBack
from ingest.sources.kafka import KafkaSource
from transport.kafka import KafkaAddress

PARTITIONS = 3


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=[bootstrap], acks="all", enable_idempotence=False)
    for i in range(count):
        producer.send(topic, value=b"step %d" % i, partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def read(source: KafkaSource, count: int) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    deadline = time.monotonic() + 30
    while len(records) < count and time.monotonic() < deadline:
        records += source.poll(1000, 0.5)
    assert len(records) == count
    return records


def open_source(url: str, tmp_path: Path) -> KafkaSource:
    source = KafkaSource(KafkaAddress.parse(url), "stale", tmp_path / "state")
    source.listen(dict.fromkeys, lambda partitions: None, lambda partitions: None)
    return source


@pytest.fixture
def three_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_PARTITIONS", str(PARTITIONS))


@pytest.mark.usefixtures("three_partitions")
def test_a_position_past_a_stale_end_is_not_a_broker_that_lost_its_data(kafka_url: str, tmp_path: Path) -> None:
    """A member that gets a partition back keeps the end it saw before (kafka-python keeps a partition's
    state across a rebalance), then seeks to where another member's stored files end, past it. Seen in a
    storm of restarts as "partition 2 ends at offset 1016, but it was read to offset 1746" on a live broker."""
    source = open_source(kafka_url, tmp_path)
    try:
        bootstrap = ",".join(source.address.bootstrap_servers)
        produce(bootstrap, source.address.topic, 30)
        read(source, 30)
        assert source.partition_lag() == dict.fromkeys(range(PARTITIONS), 0)  # each partition's end known: 10
        produce(bootstrap, source.address.topic, 30)  # now 20 records in each partition
        source.seek(dict.fromkeys(range(PARTITIONS), 15))  # where another member's stored files end
        source._check_positions()  # the check a poll makes before the partition's next fetch answers
        records = read(source, 15)
        assert sorted((r.partition, r.offset) for r in records) == [(p, o) for p in range(3) for o in range(15, 20)]
    finally:
        source.close()


@pytest.mark.usefixtures("three_partitions")
def test_a_position_past_the_end_the_broker_proves_is_refused(kafka_url: str, tmp_path: Path) -> None:
    source = open_source(kafka_url, tmp_path)
    try:
        produce(",".join(source.address.bootstrap_servers), source.address.topic, 30)
        read(source, 30)
        source.seek({0: 15})  # past the end: offsets 10-14 were never written, as after a broker lost them
        with pytest.raises(SourceWentBack, match=r"partition 0 of topic .* ends at offset 10, but it was read to "
                                                  r"offset 14: the topic was recreated or the broker lost its data"):
            source._check_positions()
    finally:
        source.close()
