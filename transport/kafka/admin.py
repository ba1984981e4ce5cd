"""Creating topics explicitly (auto-creation races on some brokers, and picks its own sizes)."""

from __future__ import annotations

import logging

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from specmetrics.transport.kafka.address import KafkaAddress
from specmetrics.transport.kafka.settings import KafkaSettings

logger = logging.getLogger(__name__)


def ensure_topic(address: KafkaAddress, settings: KafkaSettings, topic: str | None = None) -> bool:
    """Create ``topic`` (default: the address's) unless it exists; True if it was created.
    Raises a ``kafka.errors.KafkaError`` when the brokers cannot be reached."""
    name = topic or address.topic
    admin = KafkaAdminClient(bootstrap_servers=list(address.bootstrap_servers), **settings.client_config())
    try:
        if name in admin.list_topics():
            return False
        try:
            configs = {} if settings.topic_retention_ms is None else {"retention.ms": str(settings.topic_retention_ms)}
            admin.create_topics([NewTopic(name, settings.topic_partitions, settings.topic_replication,
                                          topic_configs=configs)])
        except TopicAlreadyExistsError:
            return False
        logger.info("created topic %s with %d partition(s), configs %s", name, settings.topic_partitions, configs)
        return True
    finally:
        admin.close()


def cluster_id(address: KafkaAddress, settings: KafkaSettings) -> str | None:
    """The id of the cluster the address's brokers belong to (None: the brokers name none). Raises a
    ``kafka.errors.KafkaError`` when the brokers cannot be reached."""
    admin = KafkaAdminClient(bootstrap_servers=list(address.bootstrap_servers), **settings.client_config())
    try:
        found = admin.describe_cluster().get("cluster_id")
    finally:
        admin.close()
    return str(found) if found else None
