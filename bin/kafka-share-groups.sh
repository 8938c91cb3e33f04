#!/usr/bin/env bash
source "$(dirname "$0")/_bootstrap" && exec "$PYBROKER_PY" -m pybroker.tools.share_groups "$@"
