"""A TLS listener's server context, built from Kafka's ssl.* keys at start.

Everything that can be wrong with the key material (a missing file, a key that does not match
its certificate, a wrong ssl.key.password, a JKS store) is found here, before the broker binds
its ports, and reported as a ConfigError naming the key, so the broker does not start rather
than failing every handshake later. Each listener reads its keys with its own
`listener.name.<listener>.` overrides first, as Kafka does.

Python's ssl module loads keys and certificates from files only: inline PEM
(ssl.keystore.key, ssl.keystore.certificate.chain) goes through a private temporary file that
is removed as soon as it is loaded. No trio here: this runs before the event loop serves.
"""
from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from pybroker.client.security import load_key_pair, load_trust_store
from pybroker.config import BrokerConfig, ConfigError
from pybroker.security.session import ANONYMOUS
from pybroker.security.tls_principal import NoMatchingRule, PrincipalMapper, rfc2253

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class TlsListener:
    """What a TLS listener's connections need: the context to handshake with and the rules
    that name the client."""

    context: ssl.SSLContext
    mapper: PrincipalMapper

    def principal(self, peer_cert: dict | None) -> str:
        """`User:` + the mapped subject DN of a verified client certificate, else
        User:ANONYMOUS. NoMatchingRule when no mapping rule applies (the connection is then
        closed, as Kafka fails its authentication)."""
        if not peer_cert or not peer_cert.get("subject"):
            return ANONYMOUS
        return "User:" + self.mapper.name(rfc2253(peer_cert["subject"]))


def tls_listener(config: BrokerConfig, listener: str) -> TlsListener:
    """The context and principal rules of `listener`; ConfigError for anything unusable."""
    def get(name: str) -> object:
        return config.for_listener(listener, name)

    def key_name(name: str) -> str:  # the name the user set, for the error
        prefixed = f"listener.name.{listener.lower()}.{name}"
        return prefixed if prefixed in config.originals else name

    for store in ("ssl.keystore.type", "ssl.truststore.type"):
        if str(get(store)).upper() != "PEM":
            raise ConfigError(key_name(store), get(store),
                              "pybroker reads PEM key and trust stores only: convert the "
                              "store to PEM (keytool -importkeystore to PKCS12, then openssl) "
                              f"and set {store}=PEM")
    for password in ("ssl.keystore.password", "ssl.truststore.password"):
        if get(password) is not None:
            raise ConfigError(key_name(password), "[hidden]",
                              "A PEM store has no store password (Kafka refuses it too); an "
                              "encrypted private key takes ssl.key.password")
    try:
        rules = PrincipalMapper(str(get("ssl.principal.mapping.rules")))
    except ValueError as exc:
        raise ConfigError(key_name("ssl.principal.mapping.rules"),
                          get("ssl.principal.mapping.rules"), str(exc)) from None

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # A client asking to renegotiate (TLS 1.2 and below) is refused with an alert: the
    # transport (tls_transport.py) drives OpenSSL from memory BIOs and never needs one, and
    # Kafka's SslTransportLayer refuses renegotiation too.
    context.options |= ssl.OP_NO_RENEGOTIATION
    # Both are LIST keys, whose values are tuples of str.
    protocols = cast("tuple[str, ...]", get("ssl.enabled.protocols"))
    enabled = [_VERSIONS[name] for name in protocols]
    if not enabled:
        raise ConfigError(key_name("ssl.enabled.protocols"), "",
                          "At least one TLS version must be enabled")
    try:
        context.minimum_version, context.maximum_version = min(enabled), max(enabled)
    except ValueError as exc:
        raise ConfigError(key_name("ssl.enabled.protocols"),
                          ",".join(protocols),
                          f"Not available in this OpenSSL: {exc}") from None
    ciphers = cast("tuple[str, ...]", get("ssl.cipher.suites"))
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise ConfigError(key_name("ssl.cipher.suites"),
                              ",".join(ciphers),
                              "No cipher suite of the list is known to OpenSSL (use OpenSSL "
                              "names, e.g. ECDHE-RSA-AES128-GCM-SHA256)") from None
    _load_key_store(context, get, key_name)
    context.verify_mode = _CLIENT_AUTH[str(get("ssl.client.auth"))]
    if context.verify_mode != ssl.CERT_NONE:
        _load_trust_store(context, get, key_name)
    return TlsListener(context, rules)


def _load_key_store(context: ssl.SSLContext, get: Callable[[str], object],
                    key_name: Callable[[str], str]) -> None:
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    password = get("ssl.key.password")
    if location is None and (chain is None or key is None):
        raise ConfigError(key_name("ssl.keystore.location"), None,
                          "A TLS listener needs its key and certificate: set "
                          "ssl.keystore.location (a PEM file with the private key and the "
                          "certificate chain), or ssl.keystore.key and "
                          "ssl.keystore.certificate.chain")
    if location is not None and (chain is not None or key is not None):
        raise ConfigError(key_name("ssl.keystore.location"), location,
                          "Set either ssl.keystore.location or the inline "
                          "ssl.keystore.key and ssl.keystore.certificate.chain, not both")
    name = key_name("ssl.keystore.location" if location is not None else "ssl.keystore.key")
    shown = location if location is not None else "[hidden]"
    try:
        load_key_pair(context, location, chain, key, password)
    except FileNotFoundError:
        raise ConfigError(name, shown, "No such file") from None
    except ssl.SSLError as exc:
        hint = ("wrong ssl.key.password, or the key is not PEM" if password is not None
                else "the private key is encrypted (set ssl.key.password), does not match "
                     "the certificate, or a part is missing or not PEM")
        raise ConfigError(name, shown, f"Cannot load the key and certificate: {hint} "
                                       f"({exc.reason or exc})") from None
    except OSError as exc:
        raise ConfigError(name, shown, f"Cannot read it: {exc.strerror or exc}") from None


def _load_trust_store(context: ssl.SSLContext, get: Callable[[str], object],
                      key_name: Callable[[str], str]) -> None:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        load_trust_store(context, location, inline, ssl.Purpose.CLIENT_AUTH)
    except (ssl.SSLError, OSError) as exc:
        name = key_name("ssl.truststore.location" if location is not None
                        else "ssl.truststore.certificates")
        raise ConfigError(name, location if location is not None else "[hidden]",
                          f"Cannot load the trusted certificates (PEM): "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


__all__ = ["NoMatchingRule", "TlsListener", "tls_listener"]
