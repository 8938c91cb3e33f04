#!/usr/bin/env bash
# Regenerate pybroker's figures against Apache Kafka (issue #15 §3) on a quiet machine: one
# command, six tables (each file's header names the exact bench command that made it).
#   tests/bench/KAFKA_FIGURES.md    throughput (confluent-kafka and Kafka's perf tools as load
#                                   generators), e2e latency at 5,000 and 50,000 rec/s, start,
#                                   idle and peak RSS, CPU per GB — against Kafka and Tansu
#   tests/bench/KAFKA_10KB.md       10 KB records in runs of 1 GB (--quick's 400 MB runs last
#                                   about a second: too short to time them against the JVM)
#   tests/bench/KAFKA_SCALE.md      10 -> 10,000 partitions and 10 -> 5,000 connections
#   tests/bench/KAFKA_PARTITIONS.md start with 1,000 and 10,000 partitions on disk
#   tests/bench/KAFKA_CLUSTER.md    three brokers, RF 3, acks=all, against three Kafka nodes
# About 50 minutes on 2 cores. Any argument is passed to every run (e.g. --rounds 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=(bin/pybroker-bench --quick)
"${bench[@]}" --peers tansu,kafka --workloads start,throughput,latency --loadgen confluent \
    --sizes 100,1024,10240 --partitions 1,8 --acks 1,all --rates 5000,50000 --rounds 3 \
    --markdown tests/bench/KAFKA_FIGURES.md "$@"
"${bench[@]}" --peers kafka --workloads throughput --loadgen kafka-perf \
    --sizes 1024,10240 --partitions 1,8 --acks 1,all --rounds 3 \
    --markdown tests/bench/KAFKA_PERF_TOOLS.md "$@"
bin/pybroker-bench --peers tansu,kafka --workloads throughput --loadgen confluent \
    --sizes 10240 --count 100000 --partitions 1,8 --acks 1,all --rounds 3 \
    --markdown tests/bench/KAFKA_10KB.md "$@"
"${bench[@]}" --peers tansu,kafka --workloads scale --rounds 1 \
    --markdown tests/bench/KAFKA_SCALE.md "$@"
"${bench[@]}" --peers kafka --workloads partitions --partition-counts 1000,10000 --rounds 1 \
    --markdown tests/bench/KAFKA_PARTITIONS.md "$@"
"${bench[@]}" --peers kafka --workloads cluster --rounds 3 \
    --markdown tests/bench/KAFKA_CLUSTER.md "$@"
