"""One node, every core (issue #29): the supervisor of a node's brokers (num.cores > 1), each
worker's derived configuration, and the metadata store they share when no ZooKeeper is
configured."""
