"""Kafka connection: addresses, settings (credentials included) and topic admin, shared by
the Kafka sink (:mod:`emitter.sinks.kafka`) and the ingester's Kafka source."""

from transport.kafka.address import KafkaAddress
from transport.kafka.admin import cluster_id, ensure_topic
from transport.kafka.settings import KafkaSettings

__all__ = ["KafkaAddress", "KafkaSettings", "cluster_id", "ensure_topic"]
