"""One node, every core (issue #29, docs/DESIGN.md "One node, every core"): the supervisor
that runs `num.cores` brokers as one node, each worker's derived configuration, and the
node's shared metadata store for the standalone default."""
