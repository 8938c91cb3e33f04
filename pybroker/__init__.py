"""pybroker: a Kafka-wire-compatible message broker written in Python."""
