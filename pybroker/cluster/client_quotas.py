"""Client quotas as values: who a quota is for, which quota applies to a client, and the
rules DescribeClientQuotas and AlterClientQuotas check (Kafka's ZkAdminManager and
ClientQuotaManager's default callback). Pure: no trio, no store.

Theory of operation. A quota entity is a user, a client id, or both; either part may be the
default (Kafka's `<default>`), which we hold as the empty name, since Kafka refuses empty
names ("Empty user not supported") and its tools use "" for `--entity-default` too. The image
maps each entity to its quota values (`producer_byte_rate=1048576.0`). For a connection with
user U and client id C, each quota key is looked up in Kafka's precedence order (below), and
the entity that matched also decides which clients share one rate: a quota on `user=U` is
shared by all of U's client ids, one on `client-id=<default>` is counted per client id.
Before security lands every connection's user is ANONYMOUS, as in Kafka with a PLAINTEXT
listener, so user quotas apply through `user=ANONYMOUS` or `user=<default>`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
# ZooKeeperInternals.DEFAULT_STRING: the default entity's name in znode paths.
ZK_DEFAULT = "<default>"
# The principal of a connection without authentication (Kafka's KafkaPrincipal.ANONYMOUS).
ANONYMOUS = "ANONYMOUS"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Kafka's user/client quota keys and whether a value must be whole (LONG) or may be DOUBLE.
QUOTA_KEYS: Mapping[str, bool] = {
    PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False,
}


class QuotaError(Exception):
    """A request names a bad entity, key or value: `code` is Kafka's answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class QuotaEntity:
    """A user, a client id or both; None: not part of the entity; "": the default."""

    user: str | None = None
    client_id: str | None = None

    def wire(self) -> list[dict]:
        """The entity as the protocol lists it (a null name is the default)."""
        parts = []
        if self.user is not None:
            parts.append({"entity_type": USER, "entity_name": self.user or None})
        if self.client_id is not None:
            parts.append({"entity_type": CLIENT_ID, "entity_name": self.client_id or None})
        return parts

    def zk_path(self) -> str:
        """Where Kafka keeps it under /config: clients/C, users/U or users/U/clients/C."""
        if self.user is None:
            return f"clients/{sanitize(self.client_id or '')}"
        path = f"users/{sanitize(self.user)}"
        return path if self.client_id is None else f"{path}/clients/{sanitize(self.client_id)}"

    @classmethod
    def from_zk_path(cls, path: str) -> "QuotaEntity":
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "clients":
            return cls(None, desanitize(parts[1]))
        if len(parts) == 2 and parts[0] == "users":
            return cls(desanitize(parts[1]), None)
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            return cls(desanitize(parts[1]), desanitize(parts[3]))
        raise ValueError(f"not a client quota path: {path}")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer (URL-encoding, `*` and space escaped) for znode names; the default
    entity is `<default>`, which no sanitized name can be."""
    return ZK_DEFAULT if name == "" else quote(name, safe="-_.~")


def desanitize(name: str) -> str:
    return "" if name == ZK_DEFAULT else unquote(name)


def parse_entity(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """An AlterClientQuotas entity, refused as Kafka's ZkAdminManager refuses it."""
    user: str | None = None
    client: str | None = None
    seen = []
    for entity_type, name in parts:
        if entity_type in seen:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Duplicate {entity_type} entity in the client quota entity")
        seen.append(entity_type)
        if name is not None and name == "":
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        if entity_type == USER:
            user = name or ""
        elif entity_type == CLIENT_ID:
            client = name or ""
        elif entity_type == IP:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             "IP quotas (connection_creation_rate) are not supported by "
                             "pybroker: it does not limit connection creation rates")
        else:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Unhandled client quota entity type: {entity_type}")
    if not seen:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    return QuotaEntity(user, client)


def apply_ops(current: Mapping[str, float],
              ops: Iterable[tuple[str, float, bool]]) -> dict[str, float]:
    """The entity's values after (key, value, remove) operations. Unknown keys and values of
    the wrong kind are refused (Kafka: INVALID_REQUEST); so are values of zero or below,
    which Kafka's ZooKeeper path stores but which would throttle a client forever."""
    values = dict(current)
    for key, value, remove in ops:
        if remove:
            values.pop(key, None)
            continue
        whole = QUOTA_KEYS.get(key)
        if whole is None:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        if whole and abs(round(value) - value) > 1e-6:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Configuration {key} must be a LONG value")
        if not value > 0:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Configuration {key} must be a positive value, not {value}")
        values[key] = float(round(value)) if whole else float(value)
    return values


def config_strings(values: Mapping[str, float]) -> dict[str, str]:
    """Values as Kafka writes them to a znode: LONG keys as integers, DOUBLE ones as Java
    prints a double (`50.0`)."""
    return {k: str(int(v)) if QUOTA_KEYS.get(k) else repr(float(v)) for k, v in values.items()}


def parse_config_strings(props: Mapping[str, str]) -> dict[str, float]:
    """A znode's quota values; keys that are not quotas (SCRAM credentials) are skipped."""
    out = {}
    for key, value in props.items():
        if key in QUOTA_KEYS:
            try:
                out[key] = float(value)
            except ValueError:
                continue
    return out


# -- which quota applies (ClientQuotaManager.DefaultQuotaCallback) --------------------------

def _levels(user: str, client: str) -> tuple[tuple[QuotaEntity, tuple[str, str]], ...]:
    """Kafka's precedence, each level with the sensor it counts against (user tag, client
    tag): the levels that name a user's default client or the default user's clients are
    counted per (user, client id); a user-only quota is shared by the user's clients."""
    return (
        (QuotaEntity(user, client), (user, client)),
        (QuotaEntity(user, ""), (user, client)),
        (QuotaEntity(user, None), (user, "")),
        (QuotaEntity("", client), (user, client)),
        (QuotaEntity("", ""), (user, client)),
        (QuotaEntity("", None), (user, "")),
        (QuotaEntity(None, client), ("", client)),
        (QuotaEntity(None, ""), ("", client)),
    )


def quota_for(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str,
              client_id: str) -> tuple[float, tuple[str, str]] | None:
    """The bound of quota `key` for a connection and the (user, client) it is counted
    against, or None when no quota applies."""
    if not quotas:
        return None
    for entity, tags in _levels(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None


# -- DescribeClientQuotas' filter -----------------------------------------------------------

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass(frozen=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def describe(quotas: Mapping[QuotaEntity, Mapping[str, float]],
             components: Iterable[Component], strict: bool
             ) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities a filter selects, as Kafka's ZkAdminManager.describeClientQuotas
    selects them; QuotaError for a filter Kafka refuses."""
    by_type: dict[str, Component] = {}
    for c in components:
        if c.entity_type == "":
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             "Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in by_type:
            label = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Duplicate {label} filter component entity type")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unexpected match type {c.match_type}")
        by_type[c.entity_type] = c
    if IP in by_type:
        if len(by_type) > 1:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             "Invalid entity filter component combination, IP filter "
                             "component should not be used with user or clientId filter "
                             "component.")
        return []  # no IP quotas are kept

    def matches(component: Component | None, name: str | None) -> bool:
        if component is None:
            return name is None or not strict
        if component.match_type == MATCH_EXACT:
            return name is not None and name != "" and name == component.match
        if component.match_type == MATCH_DEFAULT:
            return name == ""
        return name is not None

    return sorted(((e, dict(v)) for e, v in quotas.items()
                   if v and matches(by_type.get(USER), e.user)
                   and matches(by_type.get(CLIENT_ID), e.client_id)),
                  key=lambda item: item[0].zk_path())
