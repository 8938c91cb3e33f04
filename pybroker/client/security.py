"""How the client secures a connection: Kafka's client properties read once into settings.

Our tools take the properties Kafka's clients take (`security.protocol`, `ssl.truststore.*`,
`ssl.keystore.*`, `ssl.endpoint.identification.algorithm`, `sasl.mechanism`,
`sasl.jaas.config`), so a `client.properties` written for Kafka's tools works with ours; the
broker builds the same settings from its own keys to reach other brokers. Everything that can
be wrong (a missing file, a key that does not open, a JAAS line without a password) is found
here, before any connection is tried, and raised as `SecurityConfigError` naming the property
and never a secret. No trio here: `pybroker.client.connection` does the I/O.

Python's ssl module loads keys and certificates from files only: inline PEM
(ssl.keystore.key, ssl.keystore.certificate.chain) goes through a private temporary file that
is removed as soon as it is loaded.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

from pybroker.config.jaas import JaasError, parse_jaas

__all__ = ["ClientSecurity", "SaslCredentials", "SecurityConfigError", "client_security",
           "client_ssl_context", "sasl_credentials", "unsecured_jws", "SECURITY_PROTOCOLS",
           "SASL_MECHANISMS"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# What each mechanism's JAAS line must name (Kafka's login module classes, short names).
_LOGIN_MODULES = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
                  "SCRAM-SHA-512": "ScramLoginModule", "OAUTHBEARER": "OAuthBearerLoginModule"}


class SecurityConfigError(ValueError):
    """A security property that cannot be used; the message names it, never a secret."""


@dataclass(frozen=True)
class SaslCredentials:
    """Who to authenticate as: a user and password (PLAIN, SCRAM), or the options of an
    OAUTHBEARER unsecured login (Kafka's unsecuredLogin* JAAS options)."""

    mechanism: str
    username: str = ""
    password: str = field(default="", repr=False)
    oauth_options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientSecurity:
    """The security of every connection a client makes: TLS with `ssl_context` (SSL,
    SASL_SSL), then SASL with `sasl` (SASL_PLAINTEXT, SASL_SSL). `check_hostname` is
    Kafka's ssl.endpoint.identification.algorithm=https."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    check_hostname: bool = True
    sasl: SaslCredentials | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ClientSecurity()


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """The settings of Kafka client properties (a --command-config file's)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(
            f"Invalid value {props['security.protocol']} for configuration security.protocol: "
            f"String must be one of: {', '.join(SECURITY_PROTOCOLS)}")
    context, check = None, True
    if protocol in ("SSL", "SASL_SSL"):
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip()
        check = _check_hostname(algorithm)
        context = client_ssl_context(lambda name: props.get(name), check_hostname=check)
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        sasl = sasl_credentials(props.get("sasl.mechanism", "GSSAPI").strip(),
                                props.get("sasl.jaas.config"), "sasl.jaas.config",
                                "sasl.mechanism")
    return ClientSecurity(protocol, context, check, sasl)


def _check_hostname(algorithm: str) -> bool:
    if algorithm.lower() not in ("", "https"):
        raise SecurityConfigError(
            f"Invalid value {algorithm} for configuration ssl.endpoint.identification."
            "algorithm: use https (verify the broker's host name) or an empty value")
    return algorithm.lower() == "https"


def client_ssl_context(get: Callable[[str], object], *, check_hostname: bool = True
                       ) -> ssl.SSLContext:
    """A client TLS context from ssl.* values (`get(name)`: None when unset).

    The server is always verified: against ssl.truststore.location / .certificates, else the
    system's CAs. A key store (ssl.keystore.location, or ssl.keystore.key with
    ssl.keystore.certificate.chain) is the client certificate offered for ssl.client.auth.
    """
    for store in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = get(store)
        if kind is not None and str(kind).upper() != "PEM":
            raise SecurityConfigError(
                f"{store}={kind} is not supported: pybroker reads PEM stores only (convert "
                f"with keytool -importkeystore and openssl, then set {store}=PEM)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        load_trust_store(context, location, inline, ssl.Purpose.SERVER_AUTH)
    except (ssl.SSLError, OSError) as exc:
        name = "ssl.truststore.location" if location is not None else \
            "ssl.truststore.certificates"
        raise SecurityConfigError(f"Cannot load the trusted certificates of {name}: "
                                  f"{getattr(exc, 'strerror', None) or exc}") from None
    _load_key_store(context, get)
    return context


def _load_key_store(context: ssl.SSLContext, get: Callable[[str], object]) -> None:
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    password = get("ssl.key.password")
    if location is None and chain is None and key is None:
        return  # no client certificate: fine unless the broker requires one
    if location is None and (chain is None or key is None):
        raise SecurityConfigError("ssl.keystore.key and ssl.keystore.certificate.chain go "
                                  "together")
    name = "ssl.keystore.location" if location is not None else "ssl.keystore.key"
    try:
        load_key_pair(context, location, chain, key, password)
    except FileNotFoundError:
        raise SecurityConfigError(f"{name}={location}: no such file") from None
    except ssl.SSLError as exc:
        hint = ("wrong ssl.key.password, or not PEM" if password is not None
                else "encrypted (set ssl.key.password), not matching its certificate, or "
                     "not PEM")
        raise SecurityConfigError(f"Cannot load the key and certificate of {name}: {hint} "
                                  f"({exc.reason or exc})") from None
    except OSError as exc:
        raise SecurityConfigError(f"Cannot read {name}: {exc.strerror or exc}") from None


def load_trust_store(context: ssl.SSLContext, location: object, inline: object,
                     purpose: ssl.Purpose) -> None:
    """Trust the CAs of the PEM file `location`, else of the inline PEM text, else the
    system's (for `purpose`); ssl.SSLError or OSError for the caller to word, as Kafka's
    ssl.truststore.* keys say it on either side."""
    if location is not None:
        context.load_verify_locations(cafile=str(location))
    elif inline is not None:
        context.load_verify_locations(cadata=normal_pem(str(inline)))
    else:
        context.load_default_certs(purpose)


def load_key_pair(context: ssl.SSLContext, location: object, chain: object, key: object,
                  password: object) -> None:
    """Load a certificate chain and its private key into `context`, from the PEM file
    `location` (key and chain together, as Kafka's PEM keystore) or from the inline PEM texts
    `chain` and `key` (written to private temporary files for OpenSSL and removed at once).
    The broker's listeners and the client share it; each words the errors for its own keys:
    FileNotFoundError (no file at `location`), ssl.SSLError, OSError."""
    with contextlib.ExitStack() as stack:
        if location is not None:
            certfile = keyfile = str(location)
            if not os.path.isfile(certfile):
                raise FileNotFoundError(certfile)
        else:
            certfile = stack.enter_context(private_pem_file(str(chain)))
            keyfile = stack.enter_context(private_pem_file(str(key)))
        # Never None: OpenSSL would prompt on the terminal for an encrypted key's password.
        context.load_cert_chain(certfile, keyfile,
                                password=b"" if password is None else str(password))


def sasl_credentials(mechanism: str, jaas: object, jaas_key: str, mechanism_key: str
                     ) -> SaslCredentials:
    """Who to log in as with `mechanism`, from its JAAS line (Kafka's login modules:
    username/password options, or OAUTHBEARER's unsecuredLogin* options)."""
    if mechanism not in SASL_MECHANISMS:
        why = ("GSSAPI (Kerberos) is not supported" if mechanism == "GSSAPI"
               else f"unknown mechanism {mechanism}")
        raise SecurityConfigError(f"{mechanism_key}={mechanism}: {why}; use one of "
                                  f"{', '.join(SASL_MECHANISMS)}")
    if jaas is None:
        raise SecurityConfigError(f"{jaas_key} is needed for SASL {mechanism} (a "
                                  f"{_LOGIN_MODULES[mechanism]} line)")
    try:
        entry = parse_jaas(str(jaas))
    except JaasError as exc:
        raise SecurityConfigError(f"{jaas_key}: {exc}") from None
    if entry.short_module != _LOGIN_MODULES[mechanism]:
        raise SecurityConfigError(f"{jaas_key} names {entry.short_module}, but SASL "
                                  f"{mechanism} logs in with {_LOGIN_MODULES[mechanism]}")
    if mechanism == "OAUTHBEARER":
        options = {k: v for k, v in entry.options.items() if k.startswith("unsecuredLogin")}
        unsecured_jws(options)  # refused now rather than at every connection
        return SaslCredentials(mechanism, oauth_options=options)
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or password is None:
        raise SecurityConfigError(f"{jaas_key}: the {entry.short_module} line needs "
                                  "username=\"...\" and password=\"...\"")
    return SaslCredentials(mechanism, username, password)


def unsecured_jws(options: Mapping[str, str], now: Callable[[], float] = time.time) -> str:
    """An unsigned token (alg "none") as Kafka's OAuthBearerUnsecuredLoginCallbackHandler
    makes it: the principal claim (unsecuredLoginPrincipalClaimName, default sub) from
    unsecuredLoginStringClaim_<name>, iat, exp after unsecuredLoginLifetimeSeconds (3600),
    and the other unsecuredLogin{String,Number,List}Claim_<name> options as claims."""
    issued = now()
    claims: dict[str, object] = {"iat": int(issued)}
    for key, value in options.items():
        kind, _, name = key.partition("Claim_")
        if not name:
            continue
        if kind == "unsecuredLoginString":
            claims[name] = value
        elif kind == "unsecuredLoginNumber":
            try:
                claims[name] = float(value) if "." in value else int(value)
            except ValueError:
                raise SecurityConfigError(f"sasl.jaas.config: {key} is not a number") from None
        elif kind == "unsecuredLoginList":
            sep, body = (value[0], value[1:]) if value else (",", "")
            claims[name] = [item for item in body.split(sep) if item]
    principal = options.get("unsecuredLoginPrincipalClaimName", "sub")
    if not claims.get(principal):
        raise SecurityConfigError(f"sasl.jaas.config: OAUTHBEARER needs "
                                  f"unsecuredLoginStringClaim_{principal}=\"<principal>\"")
    try:
        lifetime = float(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    except ValueError:
        raise SecurityConfigError("sasl.jaas.config: unsecuredLoginLifetimeSeconds is not a "
                                  "number") from None
    claims["exp"] = int(issued + lifetime)

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normal_pem(text: str) -> str:
    """Inline PEM as a properties file carries it (often on one line, the line breaks lost
    to backslash continuations), rewritten with the line breaks OpenSSL needs, as Kafka's PEM
    reader accepts it. Header lines of encrypted traditional keys keep their own lines."""
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text):
        headers = re.findall(r"[A-Za-z-]+: *[^\s]+", body)
        for header in headers:
            body = body.replace(header, "")
        data = "".join(body.split())
        lines = [data[i:i + 64] for i in range(0, len(data), 64)]
        head = "\n".join(headers) + "\n\n" if headers else ""
        blocks.append(f"-----BEGIN {kind}-----\n{head}" + "\n".join(lines) +
                      f"\n-----END {kind}-----\n")
    return "".join(blocks) or text


@contextlib.contextmanager
def private_pem_file(text: str) -> Iterator[str]:
    """`text` (PEM) in a file only this process can read, removed on exit."""
    fd, path = tempfile.mkstemp(prefix="pybroker-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(normal_pem(text))
        yield path
    finally:
        os.unlink(path)
