"""The authorizer's decisions, without a broker: Kafka's matching, implications and order."""
from __future__ import annotations

import pytest

from protocol.acl_operations import AclOperation as Op
from pybroker.security.acl import acl_json
from pybroker.security.acl.authorizer import Authorizer, parse_super_users
from pybroker.security.acl.model import (
    AclBinding, AclFilter, AclPermission, PatternType, ResourceType, invalid_binding,
    operation_from_name,
)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, \
    ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
ALICE, BOB = "User:alice", "User:bob"


def acl(rtype, name, op, principal=ALICE, permission=ALLOW, pattern=LIT, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def test_no_acls_denies_unless_allow_everyone():
    assert not Authorizer().authorize(ALICE, "1.2.3.4", Op.READ, T, "a")
    assert Authorizer(allow_if_no_acl=True).authorize(ALICE, "1.2.3.4", Op.READ, T, "a")


def test_allow_everyone_applies_only_where_no_acl_exists():
    auth = Authorizer(allow_if_no_acl=True, bindings=[acl(T, "a", Op.READ, BOB)])
    assert not auth.authorize(ALICE, "h", Op.READ, T, "a")  # an ACL exists on a
    assert auth.authorize(ALICE, "h", Op.READ, T, "b")


def test_literal_prefixed_and_wildcard_resources():
    auth = Authorizer(bindings=[acl(T, "a", Op.READ), acl(T, "pre-", Op.WRITE, pattern=PRE),
                                acl(G, "*", Op.READ)])
    assert auth.authorize(ALICE, "h", Op.READ, T, "a")
    assert not auth.authorize(ALICE, "h", Op.READ, T, "ab")
    assert auth.authorize(ALICE, "h", Op.WRITE, T, "pre-x")
    assert not auth.authorize(ALICE, "h", Op.WRITE, T, "pr")
    assert auth.authorize(ALICE, "h", Op.READ, G, "anything")
    assert not auth.authorize(BOB, "h", Op.READ, G, "anything")


def test_implications():
    auth = Authorizer(bindings=[acl(T, "r", Op.READ), acl(T, "w", Op.WRITE),
                                acl(T, "ac", Op.ALTER_CONFIGS), acl(T, "all", Op.ALL)])
    assert auth.authorize(ALICE, "h", Op.DESCRIBE, T, "r")
    assert auth.authorize(ALICE, "h", Op.DESCRIBE, T, "w")
    assert not auth.authorize(ALICE, "h", Op.WRITE, T, "r")
    assert auth.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, T, "ac")
    assert not auth.authorize(ALICE, "h", Op.DESCRIBE, T, "ac")
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.DESCRIBE, Op.ALTER_CONFIGS):
        assert auth.authorize(ALICE, "h", op, T, "all")


def test_deny_wins_and_implies_nothing():
    auth = Authorizer(bindings=[acl(T, "*", Op.ALL, "User:*"),
                                acl(T, "secret", Op.READ, ALICE, DENY)])
    assert not auth.authorize(ALICE, "h", Op.READ, T, "secret")
    assert auth.authorize(ALICE, "h", Op.DESCRIBE, T, "secret")  # DENY READ ≠ DENY DESCRIBE
    assert auth.authorize(BOB, "h", Op.READ, T, "secret")
    auth.replace(auth.bindings | {acl(T, "x", Op.ALL, ALICE, DENY, PRE)})
    assert not auth.authorize(ALICE, "h", Op.DESCRIBE, T, "xy")


def test_hosts_and_principal_wildcard():
    auth = Authorizer(bindings=[acl(T, "a", Op.READ, "User:*", host="10.0.0.1")])
    assert auth.authorize(BOB, "10.0.0.1", Op.READ, T, "a")
    assert not auth.authorize(BOB, "10.0.0.2", Op.READ, T, "a")


def test_super_users_bypass():
    assert parse_super_users(" User:a ;User:b;;") == {"User:a", "User:b"}
    auth = Authorizer(super_users={"User:admin"},
                      bindings=[acl(T, "a", Op.ALL, "User:*", DENY)])
    assert auth.authorize("User:admin", "h", Op.DELETE, T, "a")
    assert auth.authorize_any("User:admin", "h", Op.WRITE, T)


def test_authorize_any_for_idempotent_producers():
    auth = Authorizer(bindings=[acl(T, "a", Op.WRITE), acl(T, "a", Op.WRITE, BOB, DENY),
                                acl(T, "b", Op.WRITE, BOB)])
    assert auth.authorize_any(ALICE, "h", Op.WRITE, T)
    assert auth.authorize_any(BOB, "h", Op.WRITE, T)
    assert not auth.authorize_any("User:carol", "h", Op.WRITE, T)


def test_filters():
    a = acl(T, "foo", Op.READ)
    p = acl(T, "fo", Op.WRITE, pattern=PRE)
    w = acl(T, "*", Op.DESCRIBE, BOB)
    auth = Authorizer(bindings=[a, p, w, acl(G, "g", Op.READ)])
    assert auth.matching(AclFilter(T, "foo", PatternType.MATCH)) == sorted(
        [a, p, w], key=lambda b: (b.pattern_type, b.resource_name, b.principal))
    assert auth.matching(AclFilter(T, "fo", PatternType.ANY)) == [p]
    assert auth.matching(AclFilter(T, "fo", LIT)) == []
    assert len(auth.matching(AclFilter())) == 4
    assert auth.matching(AclFilter(principal=BOB)) == [w]
    assert AclFilter(operation=Op.UNKNOWN).invalid()


@pytest.mark.parametrize("binding, ok", [
    (acl(T, "a", Op.READ), True),
    (acl(T, "a", Op.ANY), False),
    (acl(T, "a", Op.READ, pattern=PatternType.MATCH), False),
    (acl(T, "", Op.READ), False),
    (acl(G, "g", Op.WRITE), False),  # not a group operation
    (acl(C, "kafka-cluster", Op.IDEMPOTENT_WRITE), True),
    (acl(C, "other", Op.ALTER), False),
    (acl(X, "t", Op.WRITE, "alice"), False),  # no principal type
    (acl(X, "t", Op.ALL), True),
])
def test_create_validation(binding, ok):
    assert (invalid_binding(binding) is None) == ok


def test_zookeeper_json_round_trip():
    bindings = [acl(T, "a", Op.IDEMPOTENT_WRITE, permission=DENY), acl(T, "a", Op.READ, BOB)]
    data = acl_json.encode(bindings)
    assert b'"operation": "Read"' in data and b'"permissionType": "Deny"' in data
    assert set(acl_json.decode((T, "a", LIT), data)) == set(bindings)
    assert acl_json.path_of((T, "a", LIT)) == "/kafka-acl/Topic/a"
    assert acl_json.path_of((G, "g-", PRE)) == "/kafka-acl-extended/prefixed/Group/g-"
    assert operation_from_name("idempotent_write") == Op.IDEMPOTENT_WRITE


def test_prefix_index_finds_exactly_the_bindings_that_apply():
    """The index (lookups by prefix length) agrees with each binding's own `applies_to`."""
    import random
    rng = random.Random(7)
    names = ["".join(rng.choice("ab-") for _ in range(rng.randint(0, 6))) for _ in range(300)]
    bindings = {acl(T, n, Op.READ, pattern=rng.choice([LIT, PRE])) for n in names if n}
    auth = Authorizer(bindings=bindings)
    index = auth._index[T]
    for name in set(names) | {"*", "abab-ba"}:
        assert set(index.applying_to(name)) == {b for b in bindings if b.applies_to(name)}, name
