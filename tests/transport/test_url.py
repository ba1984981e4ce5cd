"""One place reads a sink's or source's URL: both sides name the same transport for a URL, and
refuse other schemes without echoing the URL (it may carry credentials)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmetrics.emitter.sinks import LocalLogSink, open_sink
from specmetrics.ingest.sources import LocalLogSource, open_source
from specmetrics.transport.kafka import KafkaAddress
from specmetrics.transport.url import transport_address


def test_a_file_url_is_the_local_log_and_a_kafka_url_a_topic() -> None:
    assert transport_address("file:///var/log/steps", "sink") == "/var/log/steps"
    assert transport_address("kafka://a:9092,b:9093/specmetrics.steps", "source") == KafkaAddress(
        ("a:9092", "b:9093"), "specmetrics.steps")


@pytest.mark.parametrize("role", ["sink", "source"])
def test_another_scheme_is_refused_without_the_url(role: str) -> None:
    with pytest.raises(ValueError, match=f"^unsupported {role} URL scheme 'kafkas'") as refused:
        transport_address("kafkas://user:hunter2@broker:9093/steps", role)  # type: ignore[arg-type]
    assert "hunter2" not in str(refused.value)


def test_the_sink_and_the_source_of_a_file_url_share_the_log(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'log'}"
    with open_sink(url) as sink:
        assert isinstance(sink, LocalLogSink)
        sink.send(b"", [b"one", b"two"])
        sink.flush()
    source = open_source(url, tmp_path / "state")
    assert isinstance(source, LocalLogSource)
    try:
        assert [record.value for record in source.poll(10, 1.0)] == [b"one", b"two"]
    finally:
        source.close()
