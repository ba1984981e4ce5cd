"""Kafka URLs: brokers and a topic, credentials never in them nor echoed in errors."""

from __future__ import annotations

import pytest

from specmetrics.transport.kafka import KafkaAddress


def test_urls_name_brokers_and_a_topic() -> None:
    address = KafkaAddress.parse("kafka://a:9092,b:9093/spec.steps-v1")
    assert address == KafkaAddress(("a:9092", "b:9093"), "spec.steps-v1")
    assert address.file_prefix == "spec_steps_v1"


@pytest.mark.parametrize(("url", "message"), [
    ("kafka://alice:s3cret@a:9092/t", "must not carry credentials"),
    ("kafka://a:9092/", "invalid Kafka topic"),
    ("kafka://a/t", "looks like kafka://host:9092"),
    ("kafka://a:9092/bad topic", "invalid Kafka topic"),
    ("http://a:9092/t", "starts with kafka://"),
])
def test_bad_urls_are_refused_without_echoing_secrets(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        KafkaAddress.parse(url)
    assert "s3cret" not in str(info.value)
