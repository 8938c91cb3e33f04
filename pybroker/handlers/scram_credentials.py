"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): SCRAM users are
managed over the wire, as with Kafka's admin client and kafka-configs.

The client sends a salt and a salted password, never the password; the broker keeps the
derived keys (pybroker/security/sasl/scram_credentials.py). Checks and messages follow Kafka's
ControllerApis/ScramControlManager: a user named twice, an unknown mechanism, too few or too
many iterations, deleting what does not exist. As Kafka's KafkaApis: describing needs DESCRIBE
on the cluster, altering ALTER (else CLUSTER_AUTHORIZATION_FAILED for the whole request).
"""
from __future__ import annotations

from collections import Counter

import trio
from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.security.sasl.scram_credentials import (
    MECHANISM_IDS, MECHANISM_NAMES, credential_from_salted_password, iterations_problem,
)


async def describe(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.DESCRIBE, CLUSTER)
    users = ctx.services.scram.users()
    if request.users is None or len(request.users) == 0:
        names = sorted(users)
        duplicates: set[str] = set()
    else:
        names = [u.name for u in request.users]
        counts = Counter(names)
        duplicates = {n for n, c in counts.items() if c > 1}
        names = list(dict.fromkeys(names))
    results = []
    for name in names:
        if name in duplicates:
            results.append(_result(name, ErrorCode.DUPLICATE_RESOURCE,
                                   f"Cannot describe SCRAM credentials for the same user "
                                   f"twice in a single request: {name}"))
        elif name not in users:
            results.append(_result(name, ErrorCode.RESOURCE_NOT_FOUND,
                                   f"Attempt to describe nonexistent SCRAM credentials for "
                                   f"user {name}"))
        else:
            entry = _result(name, ErrorCode.NONE, None)
            entry["credential_infos"] = [
                {"mechanism": MECHANISM_IDS[m], "iterations": c.iterations}
                for m, c in sorted(users[name].items())]
            results.append(entry)
    return {"error_code": 0, "error_message": None, "results": results}


async def alter(ctx: RequestContext, request: Container) -> dict:
    require(ctx, Op.ALTER, CLUSTER)
    store = ctx.services.scram
    existing = store.users()
    counts = Counter([(d.name, d.mechanism) for d in request.deletions]
                     + [(u.name, u.mechanism) for u in request.upsertions])
    errors: dict[str, tuple[ErrorCode, str]] = {}
    order: list[str] = []

    def fail(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    for d in request.deletions:
        order.append(d.name)
        mechanism = MECHANISM_NAMES.get(d.mechanism)
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                 f"Unknown SCRAM mechanism {d.mechanism}")
        elif counts[(d.name, d.mechanism)] > 1:
            fail(d.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif mechanism not in existing.get(d.name, {}):
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
    upserts = []
    for u in request.upsertions:
        order.append(u.name)
        mechanism = MECHANISM_NAMES.get(u.mechanism)
        problem = iterations_problem(u.iterations)
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism is None:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                 f"Unknown SCRAM mechanism {u.mechanism}")
        elif counts[(u.name, u.mechanism)] > 1:
            fail(u.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif problem is not None:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, problem)
        else:
            upserts.append((u.name, mechanism, credential_from_salted_password(
                mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)))
    # A user with any error has none of its changes applied (Kafka's per-user outcome).
    deletions = [(d.name, MECHANISM_NAMES[d.mechanism]) for d in request.deletions
                 if d.name not in errors]
    upserts = [u for u in upserts if u[0] not in errors]
    if deletions or upserts:
        await trio.to_thread.run_sync(store.alter, upserts, deletions)
    return {"results": [
        {"user": name, "error_code": int(errors[name][0]) if name in errors else 0,
         "error_message": errors[name][1] if name in errors else None}
        for name in dict.fromkeys(order)]}


def _result(user: str, code: ErrorCode, message: str | None) -> dict:
    return {"user": user, "error_code": int(code), "error_message": message,
            "credential_infos": []}


def alter_error_response(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    """`code` for every user the request names (the response has no top-level error)."""
    users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    return {"results": [
        {"user": name, "error_code": int(code), "error_message": None}
        for name in dict.fromkeys(users)]}


HANDLERS = (Handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe),
            Handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter, alter_error_response))
