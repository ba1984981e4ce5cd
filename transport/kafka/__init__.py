"""Kafka connection: addresses, settings (credentials included) and topic admin, shared by
the Kafka sink (:mod:`emitter.sinks.kafka`) and the ingester's Kafka source."""

from specmetrics.transport.kafka.address import KafkaAddress
from specmetrics.transport.kafka.admin import cluster_id, ensure_topic
from specmetrics.transport.kafka.settings import KafkaSettings

__all__ = ["KafkaAddress", "KafkaSettings", "cluster_id", "ensure_topic"]
