"""``kafka://host:port[,host:port...]/topic``: where the log lives."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlparse

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class KafkaAddress:
    bootstrap_servers: tuple[str, ...]
    topic: str

    @classmethod
    def parse(cls, url: str) -> KafkaAddress:
        """Parse a Kafka URL. Credentials in the URL are refused: they belong in
        ``SPECMETRICS_KAFKA_SASL_*`` (a URL ends up in logs and process listings)."""
        parsed = urlparse(url)
        if parsed.scheme != "kafka":
            raise ValueError(f"a Kafka URL starts with kafka://, got {parsed.scheme!r}")
        netloc = parsed.netloc
        if "@" in netloc:
            raise ValueError("a Kafka URL must not carry credentials; set SPECMETRICS_KAFKA_SASL_USERNAME and "
                             "SPECMETRICS_KAFKA_SASL_PASSWORD instead")
        servers = tuple(s for s in netloc.split(",") if s)
        if not servers or any(not re.fullmatch(r"[^:\s]+:\d{1,5}", s) for s in servers):
            raise ValueError(f"a Kafka URL looks like kafka://host:9092[,host2:9092]/topic, got {url!r}")
        topic = parsed.path.strip("/")
        if not _TOPIC.match(topic) or topic in (".", ".."):
            raise ValueError(f"invalid Kafka topic {topic!r} in {url!r}: use letters, digits, '.', '_' and '-'")
        return cls(servers, topic)

    @property
    def file_prefix(self) -> str:
        """The topic as it appears in output file names (``.`` and ``-`` become ``_``)."""
        return re.sub(r"[^A-Za-z0-9_]", "_", self.topic)
