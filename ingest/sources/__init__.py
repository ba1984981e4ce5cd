"""Sources the ingester reads, chosen by URL."""

from __future__ import annotations

from pathlib import Path

from specmetrics.ingest.sources.base import Source, SourceRecord
from specmetrics.ingest.sources.local_log import LocalLogSource
from specmetrics.transport.url import transport_address


def open_source(url: str, state_dir: Path, group: str = "specmetrics-ingest") -> Source:
    """Open the source a URL names: ``file:///path/to/log`` is the embedded local log,
    ``kafka://host:9092/topic`` a topic read as a member of consumer group ``group``."""
    address = transport_address(url, "source")
    if isinstance(address, str):
        return LocalLogSource(address, state_dir)
    from specmetrics.ingest.sources.kafka import KafkaSource

    return KafkaSource(address, group, state_dir)


__all__ = ["LocalLogSource", "Source", "SourceRecord", "open_source"]
