#!/usr/bin/env bash
# Kafka's name for bin/pybroker-server (same program, same arguments); -daemon runs the
# broker in the background, output in logs/kafkaServer.out, stopped by kafka-server-stop.sh.
bin="$(dirname "$0")"
source "$bin/_bootstrap" || exit 1
if [ "${1:-}" = "-daemon" ]; then
    shift
    source "$bin/_daemon" && start_daemon kafkaServer "$PYBROKER_PY" -m pybroker "$@"
else
    exec "$PYBROKER_PY" -m pybroker "$@"
fi
