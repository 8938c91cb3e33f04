"""ACLs end to end: a real broker with Kafka's authorizer settings, stock clients (the
principal they act as: tests/integration/acl_clients.py)."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic,
    ResourcePatternType, ResourceType,
)

from tests.helpers import Broker, force_a_lost_join_round
from tests.integration.acl_clients import (
    AUTHORIZER, ONE_BROKER, PRINCIPAL, _consume_one, _produce, allow, client_conf,
)


@pytest.fixture
def secured(tmp_path):
    """A broker whose ACLs were set up by a super user: PRINCIPAL may READ topic a and
    group g, nothing else; topics a (one message) and b exist. Restarted without super users
    (which also shows the ACLs survive a restart)."""
    broker = Broker(log_dir=tmp_path, authorizer_class_name=AUTHORIZER,
                    super_users=PRINCIPAL, **ONE_BROKER).start()
    try:
        admin = AdminClient(client_conf(broker))
        for f in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]).values():
            f.result(10)
        assert _produce(broker, "a") is None
        for f in admin.create_acls([allow(ResourceType.TOPIC, "a", AclOperation.READ),
                                    allow(ResourceType.GROUP, "g", AclOperation.READ)]
                                   ).values():
            f.result(10)
        broker.config["super.users"] = ""
        broker.restart()
        yield broker
    finally:
        broker.stop()


def test_principal_gets_exactly_what_it_was_granted(secured):
    assert _consume_one(secured, "a", "g") == b"v"
    assert _produce(secured, "a") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _consume_one(secured, "b", "g") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _consume_one(secured, "a", "h") == KafkaError.GROUP_AUTHORIZATION_FAILED
    admin = AdminClient(client_conf(secured))
    assert set(admin.list_topics(timeout=10).topics) == {"a"}  # b silently omitted
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("c", 1, 1)])["c"].result(10)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as info:
        admin.create_acls([allow(ResourceType.TOPIC, "b", AclOperation.READ)])
        list(admin.create_acls([allow(ResourceType.TOPIC, "b", AclOperation.READ)]
                               ).values())[0].result(10)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acls_survive_restart_and_are_described(tmp_path):
    broker = Broker(log_dir=tmp_path, authorizer_class_name=AUTHORIZER,
                    super_users=PRINCIPAL).start()
    try:
        admin = AdminClient(client_conf(broker))
        bindings = [allow(ResourceType.TOPIC, "pre-", AclOperation.WRITE,
                          pattern=ResourcePatternType.PREFIXED),
                    allow(ResourceType.GROUP, "g", AclOperation.READ, "User:bob")]
        for f in admin.create_acls(bindings).values():
            f.result(10)
        broker.restart()
        admin = AdminClient(client_conf(broker))
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None,
                                      None, AclOperation.ANY, AclPermissionType.ANY)
        assert set(admin.describe_acls(everything).result(10)) == set(bindings)
        removed = admin.delete_acls([AclBindingFilter(
            ResourceType.GROUP, None, ResourcePatternType.ANY, "User:bob", None,
            AclOperation.ANY, AclPermissionType.ANY)])
        assert list(removed.values())[0].result(10) == [bindings[1]]
        assert admin.describe_acls(everything).result(10) == [bindings[0]]
    finally:
        broker.stop()


def test_allow_everyone_if_no_acl_found():
    with Broker(authorizer_class_name=AUTHORIZER, allow_everyone_if_no_acl_found="true") as b:
        b.create_topic("open")
        assert _produce(b, "open") is None
        assert _consume_one(b, "open", "any") == b"v"


def test_without_an_authorizer_acl_apis_are_disabled():
    """librdkafka reports no error here; the answer itself carries Kafka's code."""
    import trio
    from pybroker.client.client import KafkaClient

    async def describe(bootstrap: str) -> object:
        async with trio.open_nursery() as nursery:
            client = KafkaClient(bootstrap, nursery=nursery)
            answer = await client.request(29, {
                "resource_type_filter": 1, "resource_name_filter": None,
                "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                "operation": 1, "permission_type": 1})
            nursery.cancel_scope.cancel()
            return answer

    with Broker() as b:
        assert trio.run(describe, b.bootstrap).error_code == 54  # SECURITY_DISABLED


def test_unknown_authorizer_class_refused():
    with pytest.raises(Exception, match="authorizer.class.name"):
        Broker(authorizer_class_name="com.example.MyAuthorizer").start().stop()


def test_kafka_acls_round_trip(capsys):
    from pybroker.tools.acls import main
    with Broker(authorizer_class_name=AUTHORIZER, super_users=PRINCIPAL) as b:
        base = ["--bootstrap-server", b.bootstrap]
        assert main(base + ["--add", "--allow-principal", "User:alice", "--operation", "Read",
                            "--topic", "t", "--group", "g"]) == 0
        # Kafka 4.1's text: what is added (group first), no listing afterwards
        assert capsys.readouterr().out == (
            "Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, "
            "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, "
            "permissionType=ALLOW)\n\n"
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
            "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, "
            "permissionType=ALLOW)\n\n")
        assert main(base + ["--add", "--producer", "--allow-principal", "User:bob",
                            "--topic", "p-", "--resource-pattern-type", "prefixed"]) == 0
        capsys.readouterr()
        assert main(base + ["--list"]) == 0
        listed = capsys.readouterr().out
        assert "name=g, patternType=LITERAL" in listed
        assert "name=p-, patternType=PREFIXED" in listed and "operation=CREATE" in listed
        assert main(base + ["--list", "--topic", "t"]) == 0
        assert capsys.readouterr().out == (
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
            "patternType=LITERAL)`:\n\t(principal=User:alice, host=*, operation=READ, "
            "permissionType=ALLOW)\n\n")
        assert main(base + ["--remove", "--force", "--topic", "t"]) == 0
        assert capsys.readouterr().out == ""
        assert main(base + ["--list", "--topic", "t"]) == 0
        assert capsys.readouterr().out == ""
        # literal is the default pattern type: the prefixed p- stays until named as such
        assert main(base + ["--remove", "--force", "--topic", "p-"]) == 0
        assert main(base + ["--list", "--topic", "p-", "--resource-pattern-type", "prefixed"]) == 0
        assert "operation=CREATE" in capsys.readouterr().out


def test_kafka_acls_asks_before_removing_and_refuses_an_operation_the_type_lacks(
        monkeypatch, capsys):
    """Without --force, --remove asks Kafka 4.1's question (its text as its AclCommand prints
    it) and removes only on "y" (read from stdin: Kafka's reads the terminal); --operation
    Write on a group is a usage error before anything is sent."""
    import io

    from pybroker.tools.acls import main
    with Broker(authorizer_class_name=AUTHORIZER, super_users=PRINCIPAL) as b:
        base = ["--bootstrap-server", b.bootstrap]
        grant = ["--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]
        assert main(base + ["--add", *grant]) == 0
        capsys.readouterr()
        monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
        assert main(base + ["--remove", *grant]) == 0
        assert capsys.readouterr().out == (
            "Are you sure you want to remove ACLs: \n \t(principal=User:alice, host=*, "
            "operation=READ, permissionType=ALLOW)\n from resource filter "
            "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)\n")
        assert main(base + ["--list", "--topic", "t"]) == 0
        assert "operation=READ" in capsys.readouterr().out  # kept
        monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
        assert main(base + ["--remove", "--topic", "t"]) == 0
        assert capsys.readouterr().out == (
            "Are you sure you want to delete all ACLs for resource filter "
            "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)\n")
        assert main(base + ["--list", "--topic", "t"]) == 0
        assert capsys.readouterr().out == ""
        assert main(base + ["--add", "--allow-principal", "User:alice", "--operation", "Write",
                            "--group", "g"]) == 1
        printed = capsys.readouterr()
        assert printed.out == ""
        assert printed.err.startswith("ResourceType GROUP only supports operations [")
        assert "READ" in printed.err and "WRITE" not in printed.err

# -- the same scenario through kafka-python and aiokafka: Kafka's errors as each surfaces them --

def _kafka_python_consume(broker: Broker, topic: str, group: str) -> object:
    """The first value read (and committed), or the error raised, or — kafka-python's way
    with a topic it may not describe — the topics its metadata marked unauthorized (its
    metadata listener raises TopicAuthorizationFailedError, which it only logs).

    Each poll waits for the rest of the deadline, as `_first_consumed` in test_groups.py
    does: kafka-python 3.0.12 joins without waiting for its topic's metadata (and loses the
    request for it when the subscription comes while its first refresh is in flight), and a
    leader that joined first assigns nothing ("No partition metadata for topic a"); the
    metadata then starts a second round, which kafka-python drops when it completes after
    the poll waiting for it gave up. With 200 ms polls the consumer read nothing in 15 s
    (once, under load). Waiting for the metadata before polling is no way out: nothing
    asks for it again until a poll joins. A poll returns with the first records, so this
    costs nothing where there are some; a topic it may not describe takes the whole 15 s,
    as nothing ends the poll."""
    import time

    import kafka
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                   auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 15
        while (left := deadline - time.monotonic()) > 0:
            for records in consumer.poll(max(1, int(left * 1000))).values():
                consumer.commit()
                return records[0].value
        if consumer._client.cluster.unauthorized_topics:
            return ("unauthorized", set(consumer._client.cluster.unauthorized_topics))
        return None
    except Exception as exc:  # noqa: BLE001 - the error is the answer
        return type(exc).__name__
    finally:
        consumer.close()


def _kafka_python_produce(broker: Broker, **config: object) -> object:
    import kafka
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=5000,
                                   **config)
    try:
        producer.send("a", b"v").get(10)
        return None
    except Exception as exc:  # noqa: BLE001
        return str(exc) if type(exc).__name__ == "KafkaError" else type(exc).__name__
    finally:
        producer.close(1)


def test_kafka_python_gets_kafkas_errors(secured):
    assert _kafka_python_consume(secured, "a", "g") == b"v"
    assert _kafka_python_consume(secured, "b", "g") == ("unauthorized", {"b"})
    assert _kafka_python_consume(secured, "a", "h") == "GroupAuthorizationFailedError"
    # Idempotent by default: InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on
    # some topic, which Kafka refuses with CLUSTER_AUTHORIZATION_FAILED; without
    # idempotence the Produce itself is refused.
    assert "ClusterAuthorizationFailedError" in _kafka_python_produce(secured)
    assert _kafka_python_produce(secured, enable_idempotence=False) == \
        "TopicAuthorizationFailedError"


@pytest.mark.in_process("delays Metadata and SyncGroup answers (request hooks)")
def test_kafka_python_reads_although_its_first_join_assigned_nothing(secured):
    """The race `_kafka_python_consume` must get past, forced: the consumer's Metadata for
    topic a comes a second late, so a first join (as leader) assigns nothing ("No partition
    metadata for topic a"), and its metadata then starts a second round, whose SyncGroup is
    held past a 200 ms poll. kafka-python 3.0.12 drops that round's result: with 200 ms polls
    the consumer read nothing in its 15 s."""
    force_a_lost_join_round(secured.control, "a")
    assert _kafka_python_consume(secured, "a", "g") == b"v"


def test_aiokafka_gets_kafkas_errors(secured):
    import asyncio

    import aiokafka

    async def consume(topic: str, group: str) -> object:
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=secured.bootstrap,
                                             group_id=group, auto_offset_reset="earliest",
                                             enable_auto_commit=False)
        try:
            await consumer.start()
            message = await asyncio.wait_for(consumer.getone(), 15)
            await consumer.commit()
            return message.value
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        finally:
            await consumer.stop()

    async def produce() -> object:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=secured.bootstrap,
                                             request_timeout_ms=5000)
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait("a", b"v"), 15)
            return None
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        finally:
            await producer.stop()

    async def scenario() -> list:
        return [await consume("a", "g"), await consume("b", "g"), await consume("a", "h"),
                await produce()]

    assert asyncio.run(scenario()) == [b"v", "TopicAuthorizationFailedError",
                                       "GroupAuthorizationFailedError",
                                       "TopicAuthorizationFailedError"]
