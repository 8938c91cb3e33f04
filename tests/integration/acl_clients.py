"""ACL tests' authorizer settings and stock clients (confluent-kafka) acting as a principal,
shared by the ACL, ACL-check and share-admin tests.

Until SASL lands every connection is `User:ANONYMOUS`; the tests name the principal they
grant to through `PRINCIPAL` and take client settings from `client_conf`, so a SASL user can
be swapped in (its security settings in `client_conf`) without rewriting them.
"""
from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
)

from tests.helpers import Broker

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PRINCIPAL = "User:ANONYMOUS"
# One broker for a test that takes super user from PRINCIPAL: over PLAINTEXT, ANONYMOUS is the
# clients' principal and the brokers' own, and a node of several brokers (as any cluster)
# needs its brokers' principal a super user to replicate and coordinate (CLUSTER_ACTION).
ONE_BROKER = {"num_cores": "1"}


def client_conf(broker: Broker, principal: str = PRINCIPAL, **extra: object) -> dict:
    """Settings for a client that authenticates as `principal` (none needed for ANONYMOUS)."""
    return {"bootstrap.servers": broker.bootstrap, **extra}


def allow(rtype: ResourceType, name: str, op: AclOperation, principal: str = PRINCIPAL,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def _consume_one(broker: Broker, topic: str, group: str) -> object:
    consumer = Consumer({**client_conf(broker), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error:
                return error.code()
            consumer.commit(message=msg, asynchronous=False)
            return msg.value()
        return None
    finally:
        consumer.close()


def _produce(broker: Broker, topic: str) -> object:
    results: list = []
    producer = Producer({**client_conf(broker), "message.timeout.ms": 5000})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    producer.flush(10)
    err = results[0] if results else "no delivery report"
    return err.code() if isinstance(err, KafkaError) else err
