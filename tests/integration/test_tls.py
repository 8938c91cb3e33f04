"""SSL listeners with real clients (issue #13): kcat, confluent-kafka, kafka-python and
aiokafka produce and consume over TLS, without and with client certificates (ssl.client.auth
=required: the certificate's subject becomes the session's principal, seen by the request
hooks); certificates the broker must refuse; the wrong protocol on either port; a stalled
handshake; PLAINTEXT and SSL on one broker. Certificates come from trustme."""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from compat.wire import create_topic, request
from protocol.api_keys import ApiKey
from tests.helpers import broker_in_thread, serving_broker
from tests.integration.group_harness import wait_until
from tests.integration.tls_certs import Certs

pytestmark = pytest.mark.in_process(
    "its module's brokers record each request's principal (request hooks); the refusals are read "
    "from the broker's log records (caplog)")

CLIENT_DN = "CN=alice,OU=eng,O=acme"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


def _tls_overrides(certs: Certs, client_auth: str = "none", **more: str) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl_keystore_location": certs.server, "ssl_truststore_location": certs.ca,
            "ssl_client_auth": client_auth, **more}


@pytest.fixture(scope="module")
def tls_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with broker_in_thread(tmp_path_factory.mktemp("tls-logs"), hooks=True,
                          **_tls_overrides(certs)) as info:
        yield info


@pytest.fixture(scope="module")
def mtls_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with broker_in_thread(tmp_path_factory.mktemp("mtls-logs"), hooks=True,
                          **_tls_overrides(certs, "required")) as info:
        yield info


def _ssl_bootstrap(info: Any) -> str:
    return f"localhost:{info.ports['SSL']}"


def _plain_bootstrap(info: Any) -> str:
    return f"127.0.0.1:{info.ports['PLAINTEXT']}"


# --- the four clients, each producing then consuming (in a group) over SSL --------------------

def _confluent(bootstrap: str, certs: Certs, mtls: bool, topic: str, values: list[bytes]
               ) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": certs.ca}
    if mtls:
        conf.update({"ssl.certificate.location": certs.client_cert,
                     "ssl.key.location": certs.client_key})
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        got = _poll_values(consumer, len(values))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _poll_values(consumer: Any, count: int) -> list[bytes]:
    """The values of up to `count` records polled within 30 s."""
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    return got


def _kafka_python(bootstrap: str, certs: Certs, mtls: bool, topic: str, values: list[bytes]
                  ) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    conf: dict[str, Any] = {"bootstrap_servers": bootstrap, "security_protocol": "SSL",
                            "ssl_cafile": certs.ca}
    if mtls:
        conf.update({"ssl_certfile": certs.client_cert, "ssl_keyfile": certs.client_key})
    producer = KafkaProducer(**conf)
    for value in values:
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **conf)
    got: list[bytes] = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == len(values):
            break
    consumer.close()
    return got


def _aiokafka(bootstrap: str, certs: Certs, mtls: bool, topic: str, values: list[bytes]
              ) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        context = create_ssl_context(
            cafile=certs.ca, certfile=certs.client_cert if mtls else None,
            keyfile=certs.client_key if mtls else None)
        conf = {"bootstrap_servers": bootstrap, "security_protocol": "SSL",
                "ssl_context": context}
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == len(values):
                        break
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _kcat(bootstrap: str, certs: Certs, mtls: bool, topic: str, values: list[bytes]
          ) -> list[bytes]:
    conf = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={certs.ca}"]
    if mtls:
        conf += ["-X", f"ssl.certificate.location={certs.client_cert}",
                 "-X", f"ssl.key.location={certs.client_key}"]
    subprocess.run(["kcat", "-b", bootstrap, *conf, "-P", "-t", topic],
                   input=b"\n".join(values) + b"\n", check=True, timeout=60)
    out = subprocess.run(["kcat", "-b", bootstrap, *conf, "-G", f"g-{topic}", "-o",
                          "beginning", "-c", str(len(values)), "-e", topic],
                         capture_output=True, check=True, timeout=60).stdout
    return out.splitlines()


CLIENTS = {"confluent-kafka": _confluent, "kafka-python": _kafka_python,
           "aiokafka": _aiokafka, "kcat": _kcat}


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("mtls", [False, True], ids=["server-auth", "client-cert-required"])
def test_client_produces_and_consumes_over_ssl(client: str, mtls: bool, certs: Certs,
                                               tls_broker: Any, mtls_broker: Any) -> None:
    info = mtls_broker if mtls else tls_broker
    topic = f"tls-{client}-{uuid.uuid4().hex[:6]}"
    create_topic(_plain_bootstrap(info), topic, 1)
    values = [f"{client}-{i}".encode() for i in range(20)]
    assert CLIENTS[client](_ssl_bootstrap(info), certs, mtls, topic, values) == values
    # The principal reached the session: every request of this topic's producer came from
    # the certificate's subject (without a certificate, User:ANONYMOUS).
    hooks = info.hooks
    produced = [r for r in hooks.requests if r.api_key == ApiKey.PRODUCE
                and any(t.name == topic for t in r.body.topic_data)]
    assert produced and {r.principal for r in produced} == \
        {f"User:{CLIENT_DN}" if mtls else "User:ANONYMOUS"}


def test_plaintext_and_ssl_listeners_on_one_broker(certs: Certs, tls_broker: Any) -> None:
    from confluent_kafka import Producer
    topic = f"both-{uuid.uuid4().hex[:6]}"
    create_topic(_plain_bootstrap(tls_broker), topic, 1)
    producer = Producer({"bootstrap.servers": _plain_bootstrap(tls_broker)})
    producer.produce(topic, b"in plain")
    assert producer.flush(30) == 0
    got = _confluent(_ssl_bootstrap(tls_broker), certs, False, topic, [b"out encrypted"])
    assert got == [b"in plain"]


def _encrypted_server_key(certs: Certs, password: bytes) -> str:
    """The broker's key and chain in one PEM file, the key encrypted with `password`."""
    from cryptography.hazmat.primitives import serialization
    pem = Path(certs.server).read_bytes()
    key = serialization.load_pem_private_key(pem, None)
    encrypted = key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(password))
    chain = pem[pem.index(b"-----BEGIN CERTIFICATE-----"):]
    return certs._write(f"server-encrypted-{password.decode()}.pem", encrypted + chain)


@pytest.mark.parametrize("form", ["broker-wide", "per-listener"])
def test_encrypted_listener_key_is_loaded_with_its_password(
        form: str, certs: Certs, tmp_path: Path) -> None:
    """ssl.key.password (or listener.name.<listener>.ssl.key.password beside that listener's
    keystore) decrypts the listener's private key: clients handshake and produce over it."""
    keystore = _encrypted_server_key(certs, b"s3cret")
    if form == "broker-wide":
        keys = {"ssl_keystore_location": keystore, "ssl_key_password": "s3cret"}
    else:  # the broker-wide key stays plain: only the listener's own keys can open it
        keys = {"listener_name_ssl_ssl_keystore_location": keystore,
                "listener_name_ssl_ssl_key_password": "s3cret"}
    with serving_broker(tmp_path, **{**_tls_overrides(certs), **keys}) as info:
        topic = f"enc-{form}-{uuid.uuid4().hex[:6]}"
        create_topic(_plain_bootstrap(info), topic, 1)
        assert _confluent(_ssl_bootstrap(info), certs, False, topic, [b"sealed"]) == [b"sealed"]


def test_encrypted_listener_key_without_or_with_a_wrong_password_stops_the_start(
        certs: Certs, tmp_path: Path) -> None:
    from pybroker.config import ConfigError
    keystore = _encrypted_server_key(certs, b"s3cret")
    for extra, words in (({}, "set ssl.key.password"),
                         ({"listener_name_ssl_ssl_key_password": "nope"},
                          "wrong ssl.key.password")):
        with pytest.raises(BaseExceptionGroup) as refused:  # trio reports the failed start
            with serving_broker(tmp_path, **{**_tls_overrides(certs),
                                               "ssl_keystore_location": keystore, **extra}):
                pass
        assert refused.group_contains(ConfigError, match=words, depth=None)


# --- what must be refused --------------------------------------------------------------------

def _tls_exchange(port: int, certs: Certs, cert: str | None, key: str | None) -> bytes:
    """An ApiVersions over TLS with the given client certificate: the response's bytes, or
    b"" when the broker closed the connection (handshake refused)."""
    context = ssl.create_default_context(cafile=certs.ca)
    if cert is not None:
        context.load_cert_chain(cert, key)
    frame = (b"\x00\x12\x00\x00" + b"\x00\x00\x00\x07" + b"\x00\x04test")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(len(frame).to_bytes(4, "big") + frame)
                return tls.recv(65536)
        except (ssl.SSLError, ConnectionError):
            return b""


@pytest.mark.parametrize("which", ["none", "stranger", "expired"])
def test_required_client_auth_refuses_missing_foreign_and_expired_certificates(
        which: str, certs: Certs, mtls_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    port = mtls_broker.ports["SSL"]
    assert _tls_exchange(port, certs, certs.client_cert, certs.client_key)  # the good one
    cert, key = {"none": (None, None), "stranger": (certs.stranger_cert, certs.stranger_key),
                 "expired": (certs.expired_cert, certs.expired_key)}[which]
    with caplog.at_level(logging.INFO, logger="pybroker"):
        assert _tls_exchange(port, certs, cert, key) == b""
        # The broker's connection task logs the failure after the client has seen it close.
        wait_until(lambda: any("TLS handshake" in r.getMessage() and "failed" in r.getMessage()
                               for r in caplog.records), 10, "the handshake failure logged")
    # The broker's records only (see test_wrong_protocol_on_either_port_is_closed_cleanly).
    assert not [r for r in caplog.records if r.name.startswith("pybroker")
                and (r.levelno >= logging.ERROR or r.exc_info)]


def test_wrong_protocol_on_either_port_is_closed_cleanly(
        certs: Certs, tls_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pybroker"):
        # A plaintext Kafka request on the TLS port: the handshake fails, the socket closes.
        with pytest.raises((ConnectionError, EOFError, OSError)):
            request(_ssl_bootstrap(tls_broker), ApiKey.API_VERSIONS, 0, {}, timeout=10)
        # A TLS client on the plaintext port: its ClientHello is no Kafka frame.
        assert _tls_exchange(tls_broker.ports["PLAINTEXT"], certs, None, None) == b""
        time.sleep(0.2)
    # The broker's records: caplog also holds those of clients other tests of this worker left
    # running (test_quotas's kafka-python producer, whose close gives up with records queued,
    # logged ECONNREFUSED ERRORs here once its broker had stopped: a fresh-clone CI run).
    assert not [r for r in caplog.records if r.name.startswith("pybroker")
                and (r.levelno >= logging.ERROR or r.exc_info)]
    # Both listeners still serve.
    assert request(_plain_bootstrap(tls_broker), ApiKey.API_VERSIONS, 0, {}).error_code == 0
    assert _tls_exchange(tls_broker.ports["SSL"], certs, None, None)


def test_stalled_handshake_is_closed_while_others_are_served(certs: Certs,
                                                             tmp_path: Path) -> None:
    from confluent_kafka import Producer
    with serving_broker(tmp_path / "logs", **_tls_overrides(
            certs, connections_max_idle_ms="1500")) as info:
        stalled = socket.create_connection(("127.0.0.1", info.ports["SSL"]), timeout=10)
        stalled.sendall(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
        closed_after: list[float] = []
        started = time.monotonic()

        def wait_closed() -> None:
            try:
                while stalled.recv(1024):
                    pass
            except OSError:
                pass
            closed_after.append(time.monotonic() - started)

        waiter = threading.Thread(target=wait_closed)
        waiter.start()
        # Meanwhile another client's handshakes and requests go through.
        topic = "busy"
        create_topic(_plain_bootstrap(info), topic, 1)
        producer = Producer({"bootstrap.servers": _ssl_bootstrap(info),
                             "security.protocol": "SSL", "ssl.ca.location": certs.ca})
        producer.produce(topic, b"not blocked")
        assert producer.flush(10) == 0
        assert time.monotonic() - started < 1.5 or not closed_after
        waiter.join(10)
        stalled.close()
    assert closed_after and 1.4 <= closed_after[0] < 5


def test_small_batches_at_the_tail_come_whole_over_ssl(certs: Certs, tls_broker: Any) -> None:
    """The rest of a segment in small batches is a FileRegion, which the plaintext listener
    sends with sendfile and the SSL one reads from the file to encrypt: a consumer over SSL
    reads every record, in order, from a topic written in ~100 KB of 1 KB batches."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = f"tail-{uuid.uuid4().hex[:6]}"
    create_topic(_plain_bootstrap(tls_broker), topic, 1)
    producer = Producer({"bootstrap.servers": _plain_bootstrap(tls_broker), "linger.ms": 0})
    values = [b"%04d" % i + os.urandom(1000) for i in range(100)]
    for value in values:  # one batch each: flushed before the next
        producer.produce(topic, value)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": _ssl_bootstrap(tls_broker),
                         "security.protocol": "SSL", "ssl.ca.location": certs.ca,
                         "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got = _poll_values(consumer, len(values))
    finally:
        consumer.close()
    assert got == values
