"""ZkAclStore on the in-memory ZooKeeper, without brokers: Kafka's znodes, the change
notifications two stores follow each other by, and the 15-minute purge of old notifications."""
from __future__ import annotations

import json
import time

import trio

from protocol.acl_operations import AclOperation as Op
from pybroker.security.acl import acl_json
from pybroker.security.acl.authorizer import Authorizer
from pybroker.security.acl.model import AclBinding, AclPermission, PatternType, ResourceType
from pybroker.security.acl.store import CHANGE_EXPIRATION_MS, ZkAclStore
from pybroker.cluster.memory_zk import MemoryZooKeeper

READ_A = AclBinding(ResourceType.TOPIC, "a", PatternType.LITERAL, "User:alice", "*", Op.READ,
                    AclPermission.ALLOW)
WRITE_PRE = AclBinding(ResourceType.TOPIC, "p-", PatternType.PREFIXED, "User:bob", "*",
                       Op.WRITE, AclPermission.ALLOW)


def test_kafka_znodes_and_notifications():
    server = MemoryZooKeeper()
    zk = server.client()
    zk.start()
    store = ZkAclStore(zk, Authorizer())
    trio.run(lambda: store.change(add=[READ_A, WRITE_PRE]))
    data, _ = zk.get("/kafka-acl/Topic/a")
    assert json.loads(data) == {"version": 1, "acls": [{
        "principal": "User:alice", "permissionType": "Allow", "operation": "Read",
        "host": "*"}]}
    assert zk.get_children("/kafka-acl-extended/prefixed/Topic") == ["p-"]
    assert zk.get_children(acl_json.LITERAL_CHANGES) == ["acl_changes_0000000000"]
    assert zk.get_children(acl_json.EXTENDED_CHANGES) == ["acl_changes_0000000000"]
    assert store.authorizer.bindings == {READ_A, WRITE_PRE}

    # A second broker's store reads them at start; removing the last binding of a
    # resource deletes its znode.
    other = server.client()
    other.start()
    assert ZkAclStore(other, Authorizer()).authorizer.bindings == {READ_A, WRITE_PRE}
    trio.run(lambda: store.change(remove=[READ_A]))
    assert zk.exists("/kafka-acl/Topic/a") is None
    assert len(zk.get_children(acl_json.LITERAL_CHANGES)) == 2


def test_a_follower_hears_the_change_through_its_watch():
    server = MemoryZooKeeper()
    writer_zk, follower_zk = server.client(), server.client()
    writer_zk.start()
    follower_zk.start()
    writer, follower = ZkAclStore(writer_zk, Authorizer()), ZkAclStore(follower_zk,
                                                                       Authorizer())

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.05)  # the watch is armed
            await writer.change(add=[WRITE_PRE])
            with trio.fail_after(5):
                while follower.authorizer.bindings != {WRITE_PRE}:
                    await trio.sleep(0.01)
            await writer.change(remove=[WRITE_PRE])
            with trio.fail_after(5):
                while follower.authorizer.bindings:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    trio.run(main)


def test_notifications_older_than_15_minutes_are_purged():
    server = MemoryZooKeeper()
    zk = server.client()
    zk.start()
    store = ZkAclStore(zk, Authorizer())
    trio.run(lambda: store.change(add=[READ_A, WRITE_PRE]))
    old = f"{acl_json.LITERAL_CHANGES}/acl_changes_0000000000"
    recent = f"{acl_json.EXTENDED_CHANGES}/acl_changes_0000000000"
    now = time.time() * 1000
    server._nodes[old].ctime = int(now - CHANGE_EXPIRATION_MS - 1000)
    server._nodes[recent].ctime = int(now - CHANGE_EXPIRATION_MS + 60_000)

    store._read_all(watch=True)
    assert zk.get_children(acl_json.LITERAL_CHANGES) == []
    assert zk.get_children(acl_json.EXTENDED_CHANGES) == ["acl_changes_0000000000"]
    assert store.authorizer.bindings == {READ_A, WRITE_PRE}  # the ACLs themselves stay
