"""``specmetrics create-topics``: create the step topic and its dead-letter topic explicitly."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from specmetrics.ingest.settings import IngestSettings


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "create-topics", help="Create the step topic and its dead-letter topic unless they exist (partitions, "
                              "replication and retention from SPECMETRICS_KAFKA_TOPIC_*).")
    parser.add_argument("url", help="The step topic: kafka://host:9092/topic.")
    parser.add_argument("--dead-letter-topic", default=None,
                        help="Dead-letter topic (default: SPECMETRICS_INGEST_DEAD_LETTER_TOPIC or "
                             "<topic>.dead-letter; '' for none).")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    from specmetrics.transport.kafka import KafkaAddress, KafkaSettings, ensure_topic

    address, settings = KafkaAddress.parse(args.url), KafkaSettings()
    dead_letter = args.dead_letter_topic if args.dead_letter_topic is not None else IngestSettings().dead_letter_topic
    topics = [address.topic, f"{address.topic}.dead-letter" if dead_letter is None else dead_letter]
    for topic in filter(None, topics):
        try:
            created = ensure_topic(address, settings, topic)
        except KafkaError as exc:
            print(f"specmetrics create-topics: error: {topic}: {exc!r}", file=sys.stderr)
            return 2
        print(f"{topic}: {'created' if created else 'exists (left as it is)'}")
    return 0
