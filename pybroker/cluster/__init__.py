"""The cluster's metadata: brokers, topics, partitions, leaders and replicas."""
