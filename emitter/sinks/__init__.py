"""Sinks for encoded step events, chosen by URL (``SPECMETRICS_SINK``)."""

from __future__ import annotations

import logging
import os
import re

from specmetrics.emitter.sinks.base import Sink
from specmetrics.emitter.sinks.local_log import LocalLogSink
from specmetrics.transport.url import transport_address


def open_sink(url: str, name: str = "default") -> Sink:
    """Open the sink a URL names: ``file:///path/to/log`` is the embedded local log,
    ``kafka://host:9092/topic`` a Kafka topic (settings from ``SPECMETRICS_KAFKA_*``; ``name``
    picks this writer's spool folder, so use a stable engine label)."""
    address = transport_address(url, "sink")
    if isinstance(address, str):
        return LocalLogSink(address)
    from specmetrics.emitter.sinks.kafka import KafkaSink
    from specmetrics.emitter.sinks.spool import SpoolInUse
    from specmetrics.transport.kafka import KafkaSettings

    settings = KafkaSettings()
    folder = settings.spool_dir / re.sub(r"[^A-Za-z0-9_.-]", "_", f"{address.topic}-{name}")
    try:
        return KafkaSink(address, settings, folder)
    except SpoolInUse:
        logging.getLogger(__name__).warning("%s is in use; this process spools to a folder of its own", folder)
        return KafkaSink(address, settings, folder.with_name(f"{folder.name}-{os.getpid()}"))


__all__ = ["LocalLogSink", "Sink", "open_sink"]
