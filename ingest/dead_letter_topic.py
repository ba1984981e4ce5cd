"""Publishing rejected records to a Kafka dead-letter topic (beside the local dead-letter files)."""

from __future__ import annotations

import logging

from kafka import KafkaProducer
from kafka.errors import KafkaError

from specmetrics.ingest.batch import DeadLetter
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings, ensure_topic

logger = logging.getLogger(__name__)


class DeadLetterTopic:
    """Each rejected record goes out with its original bytes as the value and the reason and
    origin (topic, partition, offset) as headers. An unreachable topic is logged; the local
    ``_dead_letter`` file the ingester always writes keeps the record."""

    def __init__(self, address: KafkaAddress, topic: str, settings: KafkaSettings | None = None) -> None:
        self.address = address
        self.topic = topic
        self.settings = settings or KafkaSettings()
        self._producer: KafkaProducer | None = None

    def publish(self, source_topic: str, letters: list[DeadLetter]) -> bool:
        """Send ``letters`` and wait for them; False (and a log line) if the topic is unavailable."""
        try:
            if self._producer is None:
                ensure_topic(self.address, self.settings, self.topic)
                self._producer = KafkaProducer(
                    bootstrap_servers=list(self.address.bootstrap_servers), acks="all",
                    max_block_ms=int(self.settings.request_timeout_s * 1000), max_request_size=80 * 1024 * 1024,
                    **self.settings.client_config(),
                )
            futures = [
                self._producer.send(self.topic, value=letter.payload, headers=[
                    ("reason", letter.reason.encode()), ("source_topic", source_topic.encode()),
                    ("partition", str(letter.partition).encode()), ("offset", str(letter.offset).encode()),
                ])
                for letter in letters
            ]
            self._producer.flush(timeout=self.settings.request_timeout_s)
            if all(f.is_done and f.succeeded() for f in futures):
                return True
            logger.warning("dead-letter topic %s did not take %d record(s); they are in the local _dead_letter files",
                           self.topic, sum(not (f.is_done and f.succeeded()) for f in futures))
        except KafkaError as exc:
            logger.warning("dead-letter topic %s is unavailable (%s); the records are in the local _dead_letter "
                           "files", self.topic, exc)
        self.close()
        return False

    def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.close(timeout=1)
