#!/usr/bin/env bash
# USAGE: zookeeper-shell.sh host:port[/chroot] [command args...]
# ZooKeeper's command-line client on one server, as Kafka's script of the same name: with a
# command (`get /brokers/ids/1`) it runs that and exits, without one it is interactive.
# It is Debian's zkCli.sh with -server; ZOOKEEPER_HOME: see bin/_zookeeper.
if [ $# -lt 1 ]; then
    echo "USAGE: $0 host:port[/chroot] [command args...]" >&2
    exit 1
fi
source "$(dirname "$0")/_zookeeper"
exec "$ZOOKEEPER_HOME/bin/zkCli.sh" -server "$@"
