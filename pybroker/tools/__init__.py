"""Kafka's command-line tools, flag for flag, behind the shims in bin/ (kafka-topics, ...)."""
