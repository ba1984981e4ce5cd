"""A consumer group's bad day: a stale end of a partition is not a broker that lost its data, a
member its group hands no partitions is stalled, says so, and joins again, and a member that goes
away sends a LeaveGroup only where that is asked for (against the test broker, it can leave the
group without a leader for good)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from devtools.kafka_broker import TansuBroker
from devtools.ports import free_port
from specmetrics.ingest import Ingester, IngestSettings
from specmetrics.ingest.sources.base import SourceRecord, SourceUnavailable, SourceWentBack
from specmetrics.ingest.sources.kafka import KafkaSource
from specmetrics.monitoring.live import LiveMetrics
from specmetrics.transport.kafka import KafkaAddress
from tests.support.kafka_proxy import JOIN_GROUP, LEAVE_GROUP, RequestProxy

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
    source = KafkaSource(KafkaAddress.parse(url), IngestSettings().group, tmp_path / "state")  # the test's own group
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


@pytest.mark.usefixtures("three_partitions")
def test_an_ingester_its_group_hands_nothing_is_stalled_and_leaves_to_join_again(kafka_url: str,
                                                                               tmp_path: Path) -> None:
    """The broker's group coordinator holds the join (Tansu takes about half the session timeout, 3 s here;
    after a storm of restarts it held every member's join for minutes): past max_stalled_s the ingester
    gives up its membership, as after a failure to reach the broker, and the command joins again."""
    source = open_source(kafka_url, tmp_path)
    produce(",".join(source.address.bootstrap_servers), source.address.topic, 30)
    ingester = Ingester(source, tmp_path / "out", IngestSettings(max_stalled_s=1.0))
    try:
        with pytest.raises(SourceUnavailable, match=r"stalled for [12] s \(limit SPECMETRICS_INGEST_MAX_STALLED_S=1\): "
                                                    r"its consumer group handed out no partitions"):
            ingester.run(once=False)
    finally:
        ingester.close()
        source.close()
    assert ingester.stats.records == 0 and 1.0 < ingester.stalled_s < 2.5  # checked once a second


@pytest.mark.usefixtures("three_partitions")
def test_a_stall_shows_in_the_live_metrics_until_the_group_hands_out_partitions(kafka_url: str,
                                                                              tmp_path: Path) -> None:
    source = open_source(kafka_url, tmp_path)
    produce(",".join(source.address.bootstrap_servers), source.address.topic, 30)
    live = LiveMetrics()
    ingester = Ingester(source, tmp_path / "out", IngestSettings(flush_idle_s=0.5), observer=live)
    beats: list[tuple[int, float]] = []
    try:
        ingester.run(once=False, alive=lambda stats, stalled: beats.append((stats.records, stalled)),
                     should_stop=lambda: len(beats) > 2 and beats[-1][0] == 30 and beats[-1][1] == 0.0)
    finally:
        ingester.close()
        source.close()
    waiting = [stalled for records, stalled in beats if records == 0]
    assert max(waiting) >= 1.0  # the join, counted while no partition was handed out
    assert live.snapshot().health.stalled == {source.name: 0.0}


@pytest.mark.usefixtures("three_partitions")
@pytest.mark.parametrize("leave", [False, True])
def test_leave_group_on_close_says_whether_a_stopping_ingester_sends_a_leave_group_request(
        leave: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A LeaveGroup from the member a forming group chose as its leader leaves Tansu's group without a
    leader for good (half of the tries here with plain kafka-python consumers, BENCHMARKS.md
    bench_chaos), so the suite runs without it; a member that goes away without one is dropped when its
    session times out."""
    monkeypatch.setenv("SPECMETRICS_KAFKA_LEAVE_GROUP_ON_CLOSE", str(leave).lower())
    proxy_port = free_port()
    with TansuBroker(advertised_port=proxy_port) as broker, RequestProxy(proxy_port, broker.port) as proxy:
        url = f"kafka://127.0.0.1:{proxy_port}/leaving"
        source = open_source(url, tmp_path)
        try:
            produce(f"127.0.0.1:{proxy_port}", "leaving", 30)
            read(source, 30)
        finally:
            source.close()
        joined_by_source = proxy.api_keys.count(JOIN_GROUP)
        plain = KafkaConsumer("leaving", bootstrap_servers=[f"127.0.0.1:{proxy_port}"], group_id=IngestSettings().group,
                              session_timeout_ms=6000, heartbeat_interval_ms=2000, enable_auto_commit=False)
        deadline = time.monotonic() + 30
        while not plain.assignment() and time.monotonic() < deadline:
            plain.poll(timeout_ms=500)
        assert len(plain.assignment()) == PARTITIONS  # the closed source's membership expired
        plain.close(autocommit=False)  # kafka-python's own close: a LeaveGroup, which the proxy sees
    assert joined_by_source >= 1
    assert proxy.api_keys.count(LEAVE_GROUP) == 1 + leave
