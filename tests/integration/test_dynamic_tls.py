"""Certificate rotation without a restart (KIP-226, issue #35 §7): a TLS listener's
`listener.name.<l>.ssl.keystore.location`, altered on the broker, serves every new
connection with the new certificate; naming the same location again reloads a file replaced
in place (Kafka's reloadUpdatedFilesWithoutConfigChange); a store that does not load is
refused and the listener keeps its certificate; on a cluster replicating over SSL, the
brokers' own client side follows the inter-broker listener's new stores. Certificates come
from trustme."""
from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Iterator

import pytest
import trustme
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType,
)

from pybroker.testing.cluster import Cluster
from tests.helpers import WireBroker, serving_broker
from tests.integration.admin_helpers import TIMEOUT
from tests.integration.raw import create_topic

KEY = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def keystore(ca: trustme.CA, path: Path, name: str) -> str:
    """A PEM key store (private key and chain) for 127.0.0.1 whose subject CN is `name`."""
    cert = ca.issue_cert("localhost", "127.0.0.1", common_name=name)
    path.write_bytes(cert.private_key_and_cert_chain_pem.bytes())
    return str(path)


@pytest.fixture
def broker(ca: trustme.CA, tmp_path: Path) -> Iterator[WireBroker]:
    with serving_broker(tmp_path / "logs", listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                        ssl_keystore_location=keystore(ca, tmp_path / "first.pem", "first")
                        ) as b:
        yield b


def served_name(broker: WireBroker, ca: trustme.CA) -> str:
    """The CN of the certificate a new TLS connection to the SSL listener is served."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    port = broker.ports["SSL"]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        subject = dict(pair[0] for pair in tls.getpeercert()["subject"])
    return subject["commonName"]


def alter(broker: WireBroker, value: str) -> tuple[int, str | None]:
    return alter_on(broker.bootstrap, "0", KEY, value)


def alter_on(bootstrap: str, node: str, key: str, value: str) -> tuple[int, str | None]:
    """IncrementalAlterConfigs SET of broker `node`'s `key`, from confluent-kafka over the
    plaintext listener (the admin client sends it to that broker)."""
    resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    client = AdminClient({"bootstrap.servers": bootstrap})
    future = next(iter(client.incremental_alter_configs([resource]).values()))
    try:
        future.result(TIMEOUT)
    except Exception as exc:
        return exc.args[0].code(), exc.args[0].str()
    return 0, None


def test_rotated_keystore_serves_new_connections(broker: WireBroker, ca: trustme.CA,
                                                 tmp_path: Path) -> None:
    assert served_name(broker, ca) == "first"
    second = keystore(ca, tmp_path / "second.pem", "second")
    assert alter(broker, second) == (0, None)
    assert served_name(broker, ca) == "second"
    # a stock client verifying the broker trusts it and produces over the new certificate
    create_topic(broker.bootstrap, "over-tls", 1)
    port = broker.ports["SSL"]
    errors: list = []
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem.bytes())
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                         "ssl.ca.location": str(tmp_path / "ca.pem"),
                         "message.timeout.ms": 10000})
    producer.produce("over-tls", b"v", on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    assert errors == [None]


def test_same_location_named_again_reloads_the_file(broker: WireBroker, ca: trustme.CA,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "rotating.pem"
    assert alter(broker, keystore(ca, path, "second")) == (0, None)
    assert served_name(broker, ca) == "second"
    keystore(ca, path, "third")  # replaced in place, as a certificate manager does
    assert served_name(broker, ca) == "second"  # nothing reads the file by itself
    assert alter(broker, str(path)) == (0, None)
    assert served_name(broker, ca) == "third"


def test_a_store_that_does_not_load_is_refused(broker: WireBroker, ca: trustme.CA,
                                               tmp_path: Path) -> None:
    code, message = alter(broker, str(tmp_path / "missing.pem"))
    assert code == KafkaError.INVALID_REQUEST
    assert message is not None and "No such file" in message
    assert message.endswith("for configuration Invalid dynamic configuration")
    assert served_name(broker, ca) == "first"


def test_inter_broker_clients_follow_a_rotated_certificate_authority(tmp_path: Path) -> None:
    """Brokers replicating over SSL with client certificates move to a new CA the way an
    operator does, without a restart: every trust store first takes both CAs, then every
    key store a certificate of the new one. A follower's next connection (to a new leader
    after a failover) then presents and checks the new certificates: the inter-broker
    listener's stores are this broker's client credentials too."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    (tmp_path / "old-ca.pem").write_bytes(old_ca.cert_pem.bytes())
    (tmp_path / "both-cas.pem").write_bytes(old_ca.cert_pem.bytes() + new_ca.cert_pem.bytes())
    with Cluster(3, **{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                       "security.inter.broker.protocol": "SSL", "ssl.client.auth": "required",
                       "ssl.keystore.location": keystore(old_ca, tmp_path / "old.pem", "old"),
                       "ssl.truststore.location": str(tmp_path / "old-ca.pem")}) as cluster:
        cluster.create_topic("rotated", 1, 3, {"min.insync.replicas": "2"})
        for key, value in (("ssl.truststore.location", str(tmp_path / "both-cas.pem")),
                           ("ssl.keystore.location", None)):
            for node in range(3):
                value_here = value or keystore(new_ca, tmp_path / f"new-{node}.pem", "new")
                assert alter_on(cluster.bootstrap, str(node),
                                f"listener.name.ssl.{key}", value_here) == (0, None)
        leader = cluster.leader_of("rotated")
        cluster.stop_broker(leader)
        cluster.wait_until(lambda: cluster.leader_of("rotated") not in (-1, leader),
                           "a new leader")
        errors: list = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "message.timeout.ms": 15000})
        producer.produce("rotated", b"after the rotation",
                         on_delivery=lambda e, m: errors.append(e))
        producer.flush(20)
        assert errors == [None]  # the follower fetched it from the new leader over the new CA
