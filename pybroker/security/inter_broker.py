"""How this broker reaches the others: the inter-broker listener's protocol and credentials.

Followers fetching from a leader and the transaction marker writer connect to other brokers on
the inter-broker listener (inter.broker.listener.name, or the one security.inter.broker.protocol
names), securing the connection as a client of that listener would, with what Kafka takes from
the broker's own keys: the listener's ssl.* as the client's trust store and key store (its
certificate is what a broker shows when the listener requires client certificates), and on a
SASL listener the mechanism sasl.mechanism.inter.broker.protocol with the username/password of
the listener's JAAS line for it. Built once at start, so a broker whose credentials cannot be
read does not start rather than failing every fetch.
"""
from __future__ import annotations

from pybroker.client.security import (
    ClientSecurity, SecurityConfigError, client_ssl_context, sasl_credentials)
from pybroker.config import BrokerConfig, ConfigError

__all__ = ["inter_broker_security"]


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """The security of this broker's connections to other brokers; ConfigError if unusable."""
    listener = config.inter_broker_listener_name
    protocol = config.inter_broker_security_protocol
    prefix = f"listener.name.{listener.lower()}."

    def get(name: str) -> object:
        return config.for_listener(listener, name)

    context, check = None, True
    if protocol in ("SSL", "SASL_SSL"):
        algorithm = str(get("ssl.endpoint.identification.algorithm") or "").strip().lower()
        if algorithm not in ("", "https"):
            raise ConfigError("ssl.endpoint.identification.algorithm", algorithm,
                              "Use https (verify the other brokers' host names) or an empty "
                              "value")
        check = algorithm == "https"
        try:
            context = client_ssl_context(get, check_hostname=check)
        except SecurityConfigError as exc:
            raise ConfigError(f"{prefix}ssl.truststore.location", "[hidden]",
                              f"The inter-broker listener's client side: {exc}") from None
    sasl = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = config.sasl_mechanism_inter_broker_protocol
        jaas_key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        jaas = config.originals.get(jaas_key)
        if jaas is None:
            jaas_key, jaas = "sasl.jaas.config", config.sasl_jaas_config
        try:
            sasl = sasl_credentials(mechanism, jaas, jaas_key,
                                    "sasl.mechanism.inter.broker.protocol")
        except SecurityConfigError as exc:
            raise ConfigError(jaas_key, "[hidden]",
                              f"Brokers log in to listener {listener} with it: {exc}") from None
    return ClientSecurity(protocol, context, check, sasl)
