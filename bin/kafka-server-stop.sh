#!/usr/bin/env bash
# Stops the broker that `kafka-server-start.sh -daemon` started (see bin/_daemon).
source "$(dirname "$0")/_daemon" && stop_daemon kafkaServer
