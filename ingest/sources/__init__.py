"""Sources the ingester reads, chosen by URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from emitter.log.address import local_log_dir
from ingest.sources.base import Source, SourceRecord
from ingest.sources.local_log import LocalLogSource


def open_source(url: str, state_dir: Path, group: str = "specmetrics-ingest") -> Source:
    """Open the source a URL names: ``file:///path/to/log`` is the embedded local log,
    ``kafka://host:9092/topic`` a topic read as a member of consumer group ``group``."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return LocalLogSource(local_log_dir(parsed), state_dir)
    if parsed.scheme == "kafka":
        from emitter.kafka import KafkaAddress
        from ingest.sources.kafka import KafkaSource

        return KafkaSource(KafkaAddress.parse(url), group, state_dir)
    # The URL itself is not echoed: it may carry credentials (kafkas://user:password@...).
    raise ValueError(f"unsupported source URL scheme {parsed.scheme!r}: use file:///dir (the local log) or "
                     "kafka://host:port/topic")


__all__ = ["LocalLogSource", "Source", "SourceRecord", "open_source"]
