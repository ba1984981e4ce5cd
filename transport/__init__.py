"""Transport shared by the emitter and the ingester: the embedded local log (:mod:`transport.log`)
and the Kafka connection (:mod:`transport.kafka`)."""
