#!/usr/bin/env bash
# USAGE: zookeeper-server-start.sh [-daemon] zookeeper.properties
# Runs ZooKeeper (standalone, or one node of an ensemble if the file lists server.N) in the
# foreground, as Kafka's script of the same name does; -daemon runs it in the background
# (output in logs/zookeeper.out, stopped by zookeeper-server-stop.sh). KAFKA_HEAP_OPTS
# (default -Xmx512M) and KAFKA_OPTS go to the JVM, as in Kafka. ZOOKEEPER_HOME: see bin/_zookeeper.
# tests/cluster/zookeeper.py starts ZooKeeper through this script too.
bin="$(dirname "$0")"
daemon=""
if [ "${1:-}" = "-daemon" ]; then daemon=1; shift; fi
if [ $# -lt 1 ]; then
    echo "USAGE: $0 [-daemon] zookeeper.properties" >&2
    exit 1
fi
source "$bin/_zookeeper"
# shellcheck disable=SC2086 # the *_OPTS are lists of JVM flags
set -- "$JAVA" ${KAFKA_HEAP_OPTS:--Xmx512M} $KAFKA_OPTS -cp "$CLASSPATH" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$@"
if [ -n "$daemon" ]; then
    source "$bin/_daemon"
    start_daemon zookeeper "$@"
else
    exec "$@"
fi
