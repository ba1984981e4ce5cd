"""Which transport a sink or source URL names: ``file:///dir`` is the embedded local log,
``kafka://host:port/topic`` a Kafka topic. The one place a URL's scheme is read;
:func:`emitter.sinks.open_sink` and :func:`ingest.sources.open_source` build their side on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal
from urllib.parse import urlparse

from specmetrics.transport.log.address import local_log_dir

if TYPE_CHECKING:
    from specmetrics.transport.kafka.address import KafkaAddress


def transport_address(url: str, role: Literal["sink", "source"]) -> str | KafkaAddress:
    """The local log's directory (a ``str``) or the Kafka topic's address that ``url`` names;
    ``role`` says what the URL is for in the error for any other scheme."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return local_log_dir(parsed)
    if parsed.scheme == "kafka":
        # Imported here: the transport.kafka package needs kafka-python, an optional dependency.
        from specmetrics.transport.kafka import KafkaAddress

        return KafkaAddress.parse(url)
    # The URL itself is not echoed: it may carry credentials (kafkas://user:password@...).
    raise ValueError(f"unsupported {role} URL scheme {parsed.scheme!r}: use file:///dir (the local log) or "
                     "kafka://host:port/topic")
