"""kafka-configs for SCRAM users: `--entity-type users` with SCRAM-SHA-256/512 configs.

Kafka's ConfigCommand turns `--add-config 'SCRAM-SHA-256=[iterations=8192,password=x]'` into
AlterUserScramCredentials: the password is salted and hashed here, on the client, and only
the salted form travels. `--delete-config SCRAM-SHA-256` deletes a credential; `--describe`
prints Kafka's "SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=8192" line per user. Kept apart from configs.py (topic, broker and
quota configs), which routes here.
"""
from __future__ import annotations

import os
from typing import Mapping

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.client.client import KafkaClient
from pybroker.security.sasl.scram_credentials import MECHANISM_IDS, MECHANISM_NAMES, salted_password
from pybroker.tools.common import ToolError, UsageError, out

DEFAULT_ITERATIONS = 4096  # ConfigCommand's


def is_scram_key(key: str) -> bool:
    return key in MECHANISM_IDS


async def alter_scram(client: KafkaClient, user: str | None, add: Mapping[str, str],
                      delete: list[str]) -> int:
    if not user:
        raise UsageError("An entity name must be specified with --alter of users")
    others = [k for k in [*add, *delete] if k not in MECHANISM_IDS]
    if others:
        raise ToolError(f"Only SCRAM credentials of users are served: {','.join(others)}",
                        plain=True)
    upsertions = []
    for mechanism, value in add.items():
        options = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        if "password" not in options:
            raise UsageError(f"{mechanism} needs a password: "
                             f"'{mechanism}=[iterations=8192,password=...]'")
        iterations = int(options.get("iterations", DEFAULT_ITERATIONS))
        salt = os.urandom(32)
        upsertions.append({"name": user, "mechanism": MECHANISM_IDS[mechanism],
                           "iterations": iterations, "salt": salt,
                           "salted_password": salted_password(
                               mechanism, options["password"], salt, iterations)})
    deletions = [{"name": user, "mechanism": MECHANISM_IDS[m]} for m in delete]
    response = await client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                    {"deletions": deletions, "upsertions": upsertions})
    for result in response.results:
        if result.error_code:
            raise ToolError(result.error_message or ErrorCode(result.error_code).name,
                            plain=True)
    out(f"Completed updating config for user {user}.")
    return 0


async def describe_scram(client: KafkaClient, user: str | None) -> int:
    users = None if user is None else [{"name": user}]
    response = await client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": users})
    if response.error_code:
        raise ToolError(response.error_message or ErrorCode(response.error_code).name,
                        plain=True)
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue  # Kafka prints nothing for a user without credentials
        if result.error_code:
            raise ToolError(result.error_message or ErrorCode(result.error_code).name,
                            plain=True)
        shown = ", ".join(f"{MECHANISM_NAMES[c.mechanism]}=iterations={c.iterations}"
                          for c in result.credential_infos)
        out(f"SCRAM credential configs for user-principal '{result.user}' are {shown}")
    return 0
