"""Differences pybroker keeps on purpose, each with its reason.

A rule is (case id glob, difference path glob, reason). A case whose every difference
matches a rule is `deliberate`; any other difference makes it `differs`, which the
regression test lets stand only as recorded. `FIXED` names the cases that differed until
pybroker was fixed (the fix's commit says what changed), for the report's counts.
"""
from __future__ import annotations

from fnmatch import fnmatchcase

RULES: list[tuple[str, str, str]] = [
    ("Produce v[012] *", "*",
     "Kafka 4 still advertises Produce v0-2 (librdkafka reads ApiVersions' minimum) but "
     "closes the connection on them (KIP-896); pybroker answers UNSUPPORTED_VERSION per "
     "partition: a refusal either way"),
    ("ApiVersions *", "*api_keys*",
     "the version ranges: each broker advertises what it implements (Kafka 4.1 has newer "
     "versions of several APIs); the APIs both serve are compared case by case"),
    ("* served", "served",
     "a version pybroker serves for older clients and Kafka 4.1 removed (KIP-896)"),
    ("Produce v* empty-and-null-records", "null",
     "null records: Kafka 4.1 never answers (the handler fails on the null and the request "
     "is dropped, the client times out); pybroker answers INVALID_RECORD at once"),
    ("Produce v* sequence: idempotent retry and sequence errors",
     "seq 0 retried.*log_append_time_ms",
     "a retried (duplicate) batch: Kafka answers with the first batch's cached max timestamp "
     "in log_append_time_ms (its producer-state cache keeps no append time); pybroker "
     "answers -1, as for any CreateTime append; clients read it only on LogAppendTime "
     "topics"),
    ("FindCoordinator *", "*error_message",
     "success: Kafka fills error_message with the error's name \"NONE\" (Errors.message() "
     "falls back to it), pybroker leaves it null; clients read error_code"),
    ("DescribeConfigs * topic-keys", "*.error_message",
     "Kafka 4.1 sends an empty error_message for a success and for an unknown topic alike; "
     "pybroker null on success and its own words with an error; clients read error_code"),
    ("IncrementalAlterConfigs * dynamic-broker-config", "describe.results*.error_message",
     "Kafka 4.1 sends an empty error_message for a success and for an unknown topic alike; "
     "pybroker null on success and its own words with an error; clients read error_code"),
    ("Metadata v[123] topics", "unknown, no auto-create*",
     "before v4 a Metadata request always allows auto-creation: see auto-create"),
    ("AlterPartitionReassignments *", "answer.error_message",
     "success: Kafka fills the top-level error_message, pybroker leaves it null; clients "
     "read error_code"),
    ("DescribeClientQuotas *", "answer.error_message",
     "success: Kafka fills error_message, pybroker leaves it null; clients read error_code"),
    ("DescribeUserScramCredentials *", "answer.error_message",
     "success: Kafka fills the top-level error_message, pybroker leaves it null; clients "
     "read error_code"),
    ("DescribeAcls v* defaults", "answer",
     "a filter of resource type 0 (UNKNOWN) and pattern 0: Kafka rejects it while parsing "
     "the request and closes the connection; pybroker, without an authorizer, answers "
     "SECURITY_DISABLED first, as Kafka does for a well-formed filter: a refusal either way"),
    ("DescribeAcls v* unknown-tag", "answer",
     "the defaults' filter (resource type 0, UNKNOWN): see DescribeAcls defaults"),
    ("CreateTopics v* *", "*min.insync.replicas.config_source",
     "Kafka 4's KRaft format records min.insync.replicas as a cluster-wide dynamic default "
     "(source 3, DYNAMIC_DEFAULT_BROKER_CONFIG); pybroker has no KRaft controller and "
     "reports it as the default (5); the value is the same"),
    ("CreateTopics v* edge-cases", "validate only.topics*.topic_id",
     "validate_only: Kafka's controller assigns an id to the topic it does not create; "
     "pybroker answers the zero id of a topic that does not exist"),
    ("AddPartitionsToTxn v4 defaults", "answer",
     "no transactions at all: Kafka answers a v4 request once every transaction in it is "
     "answered, so one with none is never answered (the client times out); pybroker "
     "answers at once, with no results"),
    ("AddPartitionsToTxn v4 unknown-tag", "answer",
     "the defaults' empty transactions: see AddPartitionsToTxn v4 defaults"),
    ("Metadata v* topics", "auto-create*",
     "auto-creation: Kafka's KRaft broker asks its controller and answers before the topic "
     "exists (UNKNOWN_TOPIC_OR_PARTITION, no partitions: the client asks again); pybroker "
     "creates the topic first and answers with it"),
    ("Share[FA]* v1 [du]*", "answer.error_code",
     "an empty MemberId (the defaults): Kafka 4.1.1 parses it with Uuid.fromString in "
     "KafkaApis (new ShareRequestMetadata(Uuid.fromString(memberId), ...)), which throws "
     "IllegalArgumentException, answered UNKNOWN_SERVER_ERROR (-1) as any exception; "
     "pybroker takes member ids as strings (librdkafka 2.16 draws them in standard base64, "
     "which that parse refuses too) and refuses an empty one as INVALID_REQUEST: a refusal "
     "either way, which no client sends"),
    ("AlterShareGroupOffsets v0 [du]*", "answer.error_*",
     "an empty GroupId (the defaults): Kafka 4.1.1's group coordinator answers "
     "INVALID_GROUP_ID (GroupCoordinatorService.alterShareGroupOffsets), and KafkaApis then "
     "drops it: it answers AlterShareGroupOffsetsResponse.Builder.merge(the coordinator's "
     "answer), which copies the topics alone, so a top-level error (NOT_COORDINATOR "
     "included) never reaches the client; pybroker answers the group's error at the top, "
     "where the admin client reads it"),
]

def _each(case: str, versions: range, what: str) -> dict[str, str]:
    return {case.format(v=v): what for v in versions}


FIXED: dict[str, str] = {
    **_each("Produce v{v} duplicate-topics", range(3, 12),
            "a partition named twice is written once and answered once (Kafka's map)"),
    **_each("Produce v{v} timestamps-far-past-and-future", range(3, 12),
            "log.message.timestamp.after.max.ms defaults to 1 h (Kafka 4, KIP-937): "
            "INVALID_TIMESTAMP with record_errors"),
    **_each("Produce v{v} bad-crc", range(8, 12), "error_message null unless record_errors"),
    **_each("Produce v{v} large-record", range(8, 12),
            "error_message null unless record_errors"),
    **_each("Fetch v{v} duplicate-topics", range(4, 13), "a partition named twice answered once"),
    **_each("Fetch v{v} ordinary-and-offsets", range(4, 13),
            "OFFSET_OUT_OF_RANGE answers a consumer with offsets -1"),
    **_each("Fetch v{v} unknown-topic-and-partition", range(4, 13),
            "an unknown partition's aborted_transactions is [] (null for read errors)"),
    **_each("ListOffsets v{v} ordinary", range(1, 7),
            "max timestamp (-3) before v7 is UNSUPPORTED_VERSION"),
    "SyncGroup v5 defaults": "v5+ without protocol type or name: INCONSISTENT_GROUP_PROTOCOL",
    "SyncGroup v5 unknown-tag": "v5+ without protocol type or name: INCONSISTENT_GROUP_PROTOCOL",
    **_each("CreateTopics v{v} edge-cases", range(2, 5),
            "a name given twice: one INVALID_REQUEST entry, nothing created"),
    **_each("AddOffsetsToTxn v{v} defaults", range(0, 5),
            "an empty transactional id is INVALID_REQUEST"),
    **_each("AddOffsetsToTxn v{v} unknown-tag", range(3, 5),
            "an empty transactional id is INVALID_REQUEST"),
    **_each("EndTxn v{v} defaults", range(0, 5), "an empty transactional id is INVALID_REQUEST"),
    **_each("EndTxn v{v} unknown-tag", range(3, 5),
            "an empty transactional id is INVALID_REQUEST"),
    **_each("CreatePartitions v{v} edge-cases", range(0, 4),
            "an unknown topic's error_message is null"),
    **_each("ElectLeaders v{v} null-topic_partitions", range(0, 3),
            "electing all: each topic without the partitions that need no election"),
    "DeleteRecords v2 sequence: delete records then fetch below the start":
        "a Fetch below the log start answers offsets -1",
    "DeleteTopics v6 sequence: delete and re-create with the same name":
        "an unknown partition's aborted_transactions is []",
    "Metadata v12 by-topic-id": "topics asked for by id are the ids alone, names ignored "
                                "(each id sent with the name \"\" was the topic \"\")",
}


def reason_for(case_id: str, path: str) -> str | None:
    for case_glob, path_glob, reason in RULES:
        if fnmatchcase(case_id, case_glob) and fnmatchcase(path, path_glob):
            return reason
    return None
