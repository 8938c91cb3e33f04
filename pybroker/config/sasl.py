"""What each SASL listener offers, resolved once at start from Kafka's keys.

Kafka lets most SASL keys be set per listener, with `listener.name.<listener>.` before the
key (lower-case listener name), and the JAAS line per listener and mechanism
(`listener.name.<l>.<mechanism>.sasl.jaas.config`, then `sasl.jaas.config`). The rules that
Kafka applies when the broker starts are applied here too, so a misconfigured listener stops
the broker with a clear message rather than refusing every client later: GSSAPI is not
served, an unknown mechanism is refused, PLAIN needs a PlainLoginModule with users.

connections.max.reauth.ms may also be set per listener and mechanism
(`listener.name.<l>.<mechanism>.connections.max.reauth.ms`, Kafka's SaslChannelBuilder), which
wins over the listener's and then the broker's value.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, cast

from pybroker.config.broker_keys import BROKER_CONFIG_DEFS
from pybroker.config.definitions import ConfigError, parse_value
from pybroker.config.jaas import JaasEntry, JaasError, parse_jaas

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SERVED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
# Keys Kafka takes with a listener prefix that this broker honours (for the unknown-key check).
LISTENER_KEYS = ("sasl.enabled.mechanisms", "connections.max.reauth.ms",
                 "sasl.server.max.receive.size", "sasl.jaas.config")
_PLAIN_MODULE = "PlainLoginModule"
_REAUTH = "connections.max.reauth.ms"


@dataclass(frozen=True)
class SaslListenerConfig:
    """One SASL listener's settings; `plain_users` maps user to password (from JAAS)."""

    mechanisms: tuple[str, ...]
    max_receive_size: int = 524288
    # connections.max.reauth.ms of each enabled mechanism (0: sessions never expire).
    reauth_ms_by_mechanism: Mapping[str, int] = field(default_factory=dict)
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    # OAUTHBEARER's unsecured validator options (unsecuredValidator*), from its JAAS line.
    oauth_options: Mapping[str, str] = field(default_factory=dict)

    def reauth_ms(self, mechanism: str) -> int:
        return self.reauth_ms_by_mechanism.get(mechanism, 0)


def listener_key(name: str) -> bool:
    """Whether `name` is a `listener.name.<l>.<key>` override this broker reads."""
    if not name.startswith("listener.name."):
        return False
    rest = name[len("listener.name."):].partition(".")[2]
    return rest in LISTENER_KEYS or any(
        rest.endswith(suffix) and rest[:-len(suffix)].upper() in SERVED_MECHANISMS
        for suffix in (".sasl.jaas.config", "." + _REAUTH))


def sasl_listener_config(values: Mapping[str, object], originals: Mapping[str, str],
                         listener: str) -> SaslListenerConfig:
    """The SASL settings of `listener`; ConfigError for what Kafka would refuse at start."""
    prefix = f"listener.name.{listener.lower()}."

    def get(key: str) -> tuple[str, object]:
        if prefix + key in originals:
            return prefix + key, originals[prefix + key]
        return key, values[key]

    key, raw = get("sasl.enabled.mechanisms")
    mechanisms = tuple(m.strip() for m in raw.split(",") if m.strip()) if isinstance(raw, str) \
        else tuple(cast("tuple[str, ...]", raw))  # a LIST key's parsed value
    shown = ",".join(mechanisms)
    if not mechanisms:
        raise ConfigError(key, shown, f"Listener {listener} is a SASL listener with no "
                                      "mechanism enabled")
    for mechanism in mechanisms:
        if mechanism == "GSSAPI":
            raise ConfigError(key, shown, f"GSSAPI (Kerberos) is not supported by pybroker; "
                                          f"enable one of {', '.join(SERVED_MECHANISMS)} on "
                                          f"listener {listener}")
        if mechanism not in SERVED_MECHANISMS:
            raise ConfigError(key, shown, f"Unknown SASL mechanism {mechanism}; pybroker "
                                          f"serves {', '.join(SERVED_MECHANISMS)}")
    # Both are INT keys: the parsed int, or the listener's override as written (a str).
    max_receive = int(cast("int | str", get("sasl.server.max.receive.size")[1]))
    reauth = {mechanism: _reauth_ms(originals, prefix, mechanism,
                                    int(cast("int | str", get(_REAUTH)[1])))
              for mechanism in mechanisms}
    plain_users: dict[str, str] = {}
    if PLAIN in mechanisms:
        entry = _jaas(values, originals, prefix, PLAIN)
        if entry is None or entry.short_module != _PLAIN_MODULE:
            raise ConfigError(f"{prefix}plain.sasl.jaas.config", None,
                              f"PLAIN is enabled on listener {listener}, which needs a "
                              "PlainLoginModule JAAS line with its users (user_<name>=\"...\") "
                              f"in {prefix}plain.sasl.jaas.config or sasl.jaas.config")
        plain_users = {name[len("user_"):]: password for name, password in entry.options.items()
                       if name.startswith("user_") and len(name) > len("user_")}
    oauth: dict[str, str] = {}
    if OAUTHBEARER in mechanisms:
        entry = _jaas(values, originals, prefix, OAUTHBEARER)
        if entry is not None:
            oauth = {k: v for k, v in entry.options.items() if k.startswith("unsecuredValidator")}
    return SaslListenerConfig(mechanisms, max_receive, reauth, plain_users, oauth)


def _reauth_ms(originals: Mapping[str, str], prefix: str, mechanism: str, fallback: int) -> int:
    """listener.name.<l>.<mechanism>.connections.max.reauth.ms, validated as the broker-wide
    key is; `fallback` (the listener's or the broker's value) when it is not set."""
    key = f"{prefix}{mechanism.lower()}.{_REAUTH}"
    if key not in originals:
        return fallback
    definition = BROKER_CONFIG_DEFS[_REAUTH]
    value = parse_value(key, definition.type, originals[key])
    if definition.validator is not None:
        definition.validator.check(key, value)
    return cast(int, value)  # parse_value gives an INT key's value as an int


def _jaas(values: Mapping[str, object], originals: Mapping[str, str], prefix: str,
          mechanism: str) -> JaasEntry | None:
    key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
    raw = originals.get(key)
    if raw is None:
        key, raw = "sasl.jaas.config", cast("str | None", values["sasl.jaas.config"])
    if raw is None:
        return None
    try:
        return parse_jaas(str(raw))
    except JaasError as exc:
        raise ConfigError(key, "[hidden]", str(exc)) from None
