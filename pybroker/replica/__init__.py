"""Replication: the partition layer (Kafka's Partition) and, later, the fetchers."""
