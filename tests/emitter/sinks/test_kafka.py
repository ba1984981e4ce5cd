"""The Kafka sink against a real broker: delivery, keys, outages, restarts, a full spool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from devtools.kafka_broker import TansuBroker
from specmetrics.emitter.sinks import open_sink
from specmetrics.emitter.sinks.kafka import REPLAY_BATCH, KafkaSink
from specmetrics.emitter.sinks.spool import Spool
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    """Every (partition, key, value) in the topic, in offset order per partition."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(partitions)
    consumer.seek_to_beginning()
    out: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for tp, records in sorted(consumer.poll(500).items()):
            out += [(tp.partition, r.key, r.value) for r in records]
        if all(consumer.highwater(tp) is not None and consumer.position(tp) >= consumer.highwater(tp)
               for tp in partitions):
            break
    consumer.close()
    return out


def messages(engine: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{engine}:{i}".encode() for i in range(start, start + n)]


def by_key(records: list[tuple[int, bytes, bytes]]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for _, key, value in records:
        out.setdefault(key, []).append(value)
    return out


@pytest.fixture
def own_broker() -> Iterator[TansuBroker]:
    broker = TansuBroker()
    yield broker
    broker.stop()


def test_every_message_arrives_once_keyed_and_in_order_per_engine(kafka_url: str) -> None:
    sink = open_sink(kafka_url, "engine-x")
    for i in range(0, 300, 100):
        sink.send(b"a/dp0", messages("a", 100, i))
        sink.send(b"b/dp0", messages("b", 50, i))
        sink.flush()
    sink.close()
    address = KafkaAddress.parse(kafka_url)
    records = read_topic(address.bootstrap_servers[0], address.topic)
    assert by_key(records) == {b"a/dp0": messages("a", 300), b"b/dp0": [m for i in range(0, 300, 100)
                                                                         for m in messages("b", 50, i)]}
    assert len({p for p, key, _ in records if key == b"a/dp0"}) == 1  # one engine, one partition
    assert sink.health()["delivered"] == 450 and sink.health()["spooled"] == 0


def test_an_unreachable_broker_spools_and_the_spool_is_replayed_in_order(own_broker: TansuBroker,
                                                                        tmp_path: Path) -> None:
    settings = KafkaSettings(request_timeout_s=1.0, reconnect_max_s=0.5, spool_dir=tmp_path / "spool")
    address = KafkaAddress.parse(own_broker.url("late"))
    sink = KafkaSink(address, settings, settings.spool_dir / "e")
    started = time.monotonic()
    sink.send(b"e", messages("e", 40))
    sink.flush()
    assert time.monotonic() - started < 5  # an outage costs one bounded connection attempt
    assert (sink.health()["spooled"], sink.health()["spool_pending"]) == (40, 40)
    own_broker.start()
    time.sleep(0.6)  # past the reconnection backoff
    sink.send(b"e", messages("e", 10, 40))
    sink.flush()
    sink.close()
    assert by_key(read_topic(own_broker.bootstrap, "late")) == {b"e": messages("e", 50)}
    assert sink.health()["replayed"] == 40 and sink.health()["spool_pending"] == 0


def test_a_broker_restart_recreates_the_producer_and_loses_nothing(own_broker: TansuBroker, tmp_path: Path) -> None:
    settings = KafkaSettings(request_timeout_s=1.0, reconnect_max_s=0.5, spool_dir=tmp_path / "spool")
    sink = KafkaSink(KafkaAddress.parse(own_broker.start().url("t")), settings, settings.spool_dir / "e")
    sink.send(b"e", messages("e", 20))
    sink.flush()
    own_broker.stop()
    own_broker.start()  # memory storage: an empty broker, which knows neither the topic nor the producer id
    sink.send(b"e", messages("e", 20, 20))  # the old producer fails these: they are spooled
    sink.flush()
    deadline = time.monotonic() + 20
    while sink.health()["spool_pending"] and time.monotonic() < deadline:
        time.sleep(0.3)
        sink.send(b"e", [])
    sink.send(b"e", messages("e", 5, 40))
    sink.close()
    assert by_key(read_topic(own_broker.bootstrap, "t")) == {b"e": messages("e", 25, 20)}
    assert sink.health()["producers_created"] >= 2


def test_a_full_spool_drops_and_counts_without_raising(own_broker: TansuBroker, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    settings = KafkaSettings(request_timeout_s=0.5, spool_dir=tmp_path / "spool", spool_max_bytes=4096)
    sink = KafkaSink(KafkaAddress.parse(own_broker.url("never")), settings, settings.spool_dir / "e")
    for i in range(10):
        sink.send(b"e", [bytes(1000) for _ in range(2)])
        sink.flush()
    sink.close()
    health = sink.health()
    assert health["spooled"] + health["dropped_spool_full"] == 20
    assert health["dropped_spool_full"] >= 16 and health["spooled"] >= 2
    assert "cannot spool" in caplog.text and caplog.text.count("cannot spool") == 1


# Runs as root of a user namespace of its own, where it can mount a 1 MiB tmpfs: a real full disk.
_FULL_DISK = """
import json, sys
from pathlib import Path
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings
from specmetrics.emitter.sinks.kafka import KafkaSink
from specmetrics.emitter.sinks.spool import Spool
from tests.support.full_disk import fill, mount_tmpfs

disk, url = Path(sys.argv[1]), sys.argv[2]
mount_tmpfs(disk, "1m")
spool = Spool(disk / "e", 1 << 30)  # left by an outage: more than one replay batch
spool.append([(b"e", b"old:%d" % i) for i in range(5000)])
spool.close()
fill(disk)
sink = KafkaSink(KafkaAddress.parse(url), KafkaSettings(spool_dir=disk, request_timeout_s=5), disk / "e")
for i in range(3):
    sink.send(b"e", [b"new:%d" % i])
    sink.flush()
sink.close()
print(json.dumps(sink.health()))
"""


def test_a_full_disk_does_not_stop_the_spool_from_draining(kafka_url: str, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", _FULL_DISK,
                           str(disk), kafka_url], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    health = json.loads(proc.stdout.splitlines()[-1])
    # New messages go behind the replay while the spool's last page has room, else straight to the broker after it
    assert (health["replayed"] + health["delivered"], health["dropped_spool_full"], health["spool_pending"]) == \
        (5003, 0, 0)
    assert "cannot record the replay position" in proc.stderr
    address = KafkaAddress.parse(kafka_url)
    expected = [f"old:{i}".encode() for i in range(5000)] + [f"new:{i}".encode() for i in range(3)]
    assert by_key(read_topic(address.bootstrap_servers[0], address.topic)) == {b"e": expected}  # each once


def left_in_spool(settings: KafkaSettings, n: int) -> int:
    """What an earlier process left after an outage: ``n`` messages in the engine's spool; its size."""
    spool = Spool(settings.spool_dir / "e", settings.spool_max_bytes)
    spool.append([(b"e", m) for m in messages("old", n)])
    spool.close()
    return spool.size_bytes


def test_the_spool_is_replayed_a_bounded_chunk_per_send_while_new_messages_queue_behind(
        kafka_url: str, tmp_path: Path) -> None:
    settings = KafkaSettings(spool_dir=tmp_path / "spool")
    left_in_spool(settings, 3 * REPLAY_BATCH + 500)
    sink = KafkaSink(KafkaAddress.parse(kafka_url), settings, settings.spool_dir / "e")
    sink.send(b"e", messages("new", 1))
    sink.flush()
    health = sink.health()  # the publisher thread is back after one chunk, not after the whole spool
    assert (health["replayed"], health["spooled"], health["spool_pending"]) == (REPLAY_BATCH, 1, 2 * REPLAY_BATCH + 501)
    sent = 1
    while sink.health()["spool_pending"]:
        sink.send(b"e", messages("new", 1, sent))
        sink.flush()
        sent += 1
    assert sent == 4 and sink.health()["replayed"] == 3 * REPLAY_BATCH + 503
    sink.close()
    address = KafkaAddress.parse(kafka_url)
    assert by_key(read_topic(address.bootstrap_servers[0], address.topic)) == \
        {b"e": messages("old", 3 * REPLAY_BATCH + 500) + messages("new", 4)}


def test_when_the_spool_cannot_take_new_messages_the_replay_finishes_first_and_drops_nothing(
        kafka_url: str, tmp_path: Path) -> None:
    settings = KafkaSettings(spool_dir=tmp_path / "spool")
    full = settings.model_copy(update={"spool_max_bytes": left_in_spool(settings, 2 * REPLAY_BATCH)})
    sink = KafkaSink(KafkaAddress.parse(kafka_url), full, settings.spool_dir / "e")  # no room for a new message
    sink.send(b"e", messages("new", 1))
    sink.flush()
    sink.close()
    health = sink.health()
    assert (health["replayed"], health["delivered"], health["dropped_spool_full"]) == (2 * REPLAY_BATCH, 1, 0)
    address = KafkaAddress.parse(kafka_url)
    assert by_key(read_topic(address.bootstrap_servers[0], address.topic)) == \
        {b"e": messages("old", 2 * REPLAY_BATCH) + messages("new", 1)}
