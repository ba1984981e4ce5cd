"""``specmetrics create-topics``: the step and dead-letter topics, sized from the environment."""

from __future__ import annotations

from typing import Any

import pytest

from specmetrics.cli import main
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings, admin


def test_topics_are_created_with_the_partitions_replication_and_retention_of_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[Any] = []

    class FakeAdmin:
        def __init__(self, **config: Any) -> None:
            pass

        def list_topics(self) -> list[str]:
            return []

        def create_topics(self, topics: list[Any]) -> None:
            created.extend(topics)

        def close(self) -> None:
            pass

    monkeypatch.setattr(admin, "KafkaAdminClient", FakeAdmin)
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_PARTITIONS", "12")
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_REPLICATION", "3")
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_RETENTION_MS", "86400000")
    assert admin.ensure_topic(KafkaAddress.parse("kafka://b:9092/steps"), KafkaSettings())
    [topic] = created
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("steps", 12, 3)
    assert topic.topic_configs == {"retention.ms": "86400000"}
    monkeypatch.delenv("SPECMETRICS_KAFKA_TOPIC_RETENTION_MS")
    admin.ensure_topic(KafkaAddress.parse("kafka://b:9092/steps"), KafkaSettings())
    assert created[1].topic_configs == {}  # the broker's default retention


def test_create_topics_makes_the_step_and_dead_letter_topics_once(
        kafka_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    topic = KafkaAddress.parse(kafka_url).topic
    assert main(["create-topics", kafka_url]) == 0
    assert capsys.readouterr().out == f"{topic}: created\n{topic}.dead-letter: created\n"
    assert main(["create-topics", kafka_url, "--dead-letter-topic", ""]) == 0
    assert capsys.readouterr().out == f"{topic}: exists (left as it is)\n"
