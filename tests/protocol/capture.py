"""Capture request frames from stock Kafka clients, to keep as golden test data.

A fake broker -- plain sockets, one thread per connection, our own codec -- answers just enough
for a producer to send one record: ApiVersions (each declared API at its declared range),
Metadata (one broker, itself; topic "golden" with one partition led by broker 0),
InitProducerId, Produce (success) and FindCoordinator. It records every raw request frame.
Each client runs against its own fake broker, so frames are attributed to the client.

    .venv/bin/python tests/protocol/capture.py            # capture, print what was seen
    .venv/bin/python tests/protocol/capture.py --write    # and store it under golden/

Stored frames are the request payload without its 4-byte size prefix (what `decode_request`
takes), named `golden/<client>/<api>_v<version>_<n>.bin` with `n` counting repeats of the same
API and version. The files are re-captured whenever the lead re-runs `--write`; the clients put
timestamps and random ids in them, so the bytes change between captures but stay valid.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import struct
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol.codec import (
    ProtocolError, UnsupportedVersion, api_versions_error_body, decode_request, encode_response,
)
from protocol.messages import APIS
from protocol.schema import snake

GOLDEN = Path(__file__).parent / "golden"
TOPIC = "golden"
TOPIC_ID = uuid.UUID("6f1e0e6c-5b1a-4c57-9d0c-2a5b3c9e7f01")
# The APIs whose first frames are kept per client.
KEEP = {"ApiVersions", "Metadata", "InitProducerId", "Produce", "FindCoordinator"}
TIMEOUT_S = 20.0


@dataclass
class Captured:
    api_key: int
    api_version: int
    frame: bytes

    @property
    def api_name(self) -> str:
        api = APIS.get(self.api_key)
        return api.name if api is not None else f"api{self.api_key}"


@dataclass
class FakeBroker:
    """Answers a producer's requests with our codec; records every frame it is sent."""

    frames: list[Captured] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._next_offset = 0
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    def __enter__(self) -> "FakeBroker":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._listener.close()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- sockets ------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.5)
        buf = b""
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except (TimeoutError, socket.timeout):
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4:4 + size], buf[4 + size:]
                    reply = self._handle(frame)
                    if reply is False:
                        return
                    if reply:
                        conn.sendall(reply)

    # -- requests -----------------------------------------------------------------------------
    def _handle(self, frame: bytes) -> bytes | None | Literal[False]:
        """The response frame, None for no response (acks=0), False to close the connection."""
        key, version = struct.unpack_from(">hh", frame) if len(frame) >= 4 else (-1, -1)
        with self._lock:
            self.frames.append(Captured(key, version, frame))
        try:
            request = decode_request(frame)
        except UnsupportedVersion as exc:
            self.errors.append(f"api {key} v{version}: {exc}")
            if key == 18 and exc.header is not None:  # KIP-511: answer in a v0 body
                return encode_response(18, 0, exc.header.correlation_id,
                                       api_versions_error_body(0, APIS[18].max_version))
            return False
        except ProtocolError as exc:
            self.errors.append(f"api {key} v{version}: cannot decode: {exc}")
            return False
        handler = self._HANDLERS.get(key)
        if handler is None:
            self.errors.append(f"api {key} v{version}: no fake handler")
            return False
        body = handler(self, request.body, version)
        if body is None:
            return None
        return encode_response(key, version, request.header.correlation_id, body)

    def _api_versions(self, body: Any, version: int) -> dict:
        return {"error_code": 0, "throttle_time_ms": 0,
                "api_keys": [{"api_key": api.key, "min_version": api.min_version,
                              "max_version": api.max_version} for api in APIS.values()]}

    def _metadata(self, body: Any, version: int) -> dict:
        names = [TOPIC] if body.topics is None else [t.name for t in body.topics]
        topics = []
        for name in names:
            known = name == TOPIC
            topics.append({
                "error_code": 0 if known else 3, "name": name,
                "topic_id": TOPIC_ID if known else uuid.UUID(int=0), "is_internal": False,
                "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 0,
                                "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0],
                                "offline_replicas": []}] if known else [],
            })
        return {"throttle_time_ms": 0,
                "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
                "cluster_id": "golden-cluster", "controller_id": 0, "topics": topics}

    def _init_producer_id(self, body: Any, version: int) -> dict:
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4242, "producer_epoch": 0}

    def _produce(self, body: Any, version: int) -> dict | None:
        if body.acks == 0:
            return None
        responses = []
        for topic in body.topic_data:
            parts = []
            for p in topic.partition_data:
                with self._lock:
                    base, self._next_offset = self._next_offset, self._next_offset + 1
                parts.append({"index": p.index, "error_code": 0, "base_offset": base,
                              "log_append_time_ms": -1, "log_start_offset": 0})
            responses.append({"name": topic.name, "partition_responses": parts})
        return {"responses": responses, "throttle_time_ms": 0}

    def _find_coordinator(self, body: Any, version: int) -> dict:
        node = {"node_id": 0, "host": "127.0.0.1", "port": self.port, "error_code": 0,
                "error_message": None}
        return {"throttle_time_ms": 0, **node,
                "coordinators": [{"key": k, **node} for k in body.coordinator_keys]}

    _HANDLERS: ClassVar[dict[int, Callable[..., Any]]] = {
        18: _api_versions, 3: _metadata, 22: _init_producer_id, 0: _produce,
        10: _find_coordinator,
    }


# -- the clients ---------------------------------------------------------------------------------

def run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5000,
                             max_block_ms=10000)
    try:
        producer.send(TOPIC, b"golden from kafka-python").get(timeout=10)
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=2)


def _run_confluent(bootstrap: str, idempotent: bool) -> None:
    from confluent_kafka import Producer
    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                         "message.timeout.ms": 10000, "socket.timeout.ms": 5000})
    producer.produce(TOPIC, b"golden from confluent-kafka",
                     on_delivery=lambda err, msg: delivered.append(err))
    remaining = producer.flush(15)
    if remaining or delivered != [None]:
        raise RuntimeError(f"confluent-kafka delivery failed: {delivered}, {remaining} left")


def run_confluent(bootstrap: str) -> None:
    _run_confluent(bootstrap, idempotent=False)


def run_confluent_idempotent(bootstrap: str) -> None:
    _run_confluent(bootstrap, idempotent=True)


def run_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait(TOPIC, b"golden from aiokafka"), 10)
        finally:
            await producer.stop()

    asyncio.run(main())


def run_kcat(bootstrap: str) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise FileNotFoundError("kcat")
    subprocess.run([kcat, "-b", bootstrap, "-P", "-t", TOPIC, "-X", "api.version.request=true",
                    "-X", "message.timeout.ms=10000"],
                   input=b"golden from kcat\n", check=True, timeout=TIMEOUT_S,
                   capture_output=True)


CLIENTS: dict[str, Callable[[str], None]] = {
    "kafka-python": run_kafka_python,
    "confluent-kafka": run_confluent,
    "confluent-kafka-idempotent": run_confluent_idempotent,
    "aiokafka": run_aiokafka,
    "kcat": run_kcat,
}


def client_available(name: str) -> bool:
    modules = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka",
               "confluent-kafka-idempotent": "confluent_kafka", "aiokafka": "aiokafka"}
    if name == "kcat":
        return shutil.which("kcat") is not None
    try:
        __import__(modules[name])
    except ImportError:
        return False
    return True


def capture(name: str) -> FakeBroker:
    """Run one client against a fresh fake broker; the broker holds what it was sent."""
    with FakeBroker() as broker:
        CLIENTS[name](broker.bootstrap)
    return broker


def selected(frames: list[Captured]) -> dict[str, bytes]:
    """The frames to keep: the first of each (API, version) among the producer's APIs."""
    out: dict[str, bytes] = {}
    seen: set[tuple[int, int]] = set()
    for c in frames:
        if c.api_name not in KEEP or (c.api_key, c.api_version) in seen:
            continue
        seen.add((c.api_key, c.api_version))
        out[f"{snake(c.api_name)}_v{c.api_version}_0.bin"] = c.frame
    return out


def write(name: str, frames: dict[str, bytes]) -> None:
    directory = GOLDEN / name
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.bin"):
        old.unlink()
    for filename, frame in frames.items():
        (directory / filename).write_bytes(frame)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store frames under golden/")
    parser.add_argument("clients", nargs="*", default=list(CLIENTS), help="clients to run")
    args = parser.parse_args(argv)
    status = 0
    for name in args.clients:
        if not client_available(name):
            print(f"{name}: not installed, skipped")
            continue
        try:
            broker = capture(name)
        except Exception as exc:  # report and carry on with the other clients
            print(f"{name}: FAILED: {exc!r}")
            status = 1
            continue
        seen = ", ".join(f"{c.api_name} v{c.api_version}" for c in broker.frames)
        print(f"{name}: {seen}")
        for error in broker.errors:
            print(f"  finding: {error}")
            status = 1
        keep = selected(broker.frames)
        if args.write:
            write(name, keep)
            print(f"  wrote {len(keep)} frames to {GOLDEN / name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
