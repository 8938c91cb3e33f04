"""Strict encoding under tests: a key no version of the schema declares is refused.

Building takes any mapping and gives a missing key its default, so a misspelt field (a
handler's `"eror_code"`) would go out as 0 without a word. Under PYBROKER_STRICT_ENCODE=1,
which tests/conftest.py sets for the whole suite, the encoder names the message, the path and
the key instead. A key that other versions declare is still dropped, as Kafka drops it.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from protocol import schema
from protocol.api_keys import ApiKey
from protocol.messages import APIS
from protocol.schema import Message, UnknownField, Versions, f, struct

ROOT = Path(__file__).resolve().parents[2]
PRODUCE = APIS[ApiKey.PRODUCE].response
FETCH = APIS[ApiKey.FETCH].response


def _produce(partition: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5, **partition}]}], **top}


ENCODERS: dict[str, Callable[[Message, Any, int], Any]] = {
    "compiled": lambda m, body, v: m.encode(body, v),
    "parts": lambda m, body, v: m.encode_parts(body, v),
    "plain": lambda m, body, v: m.encode_plain(body, v),
}


def test_the_suite_encodes_strictly() -> None:
    assert schema.STRICT, "tests/conftest.py turns strict encoding on before anything encodes"


def _strict_in_a_process(env: str | None, code: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "PYBROKER_STRICT_ENCODE"}
    if env is not None:
        environ["PYBROKER_STRICT_ENCODE"] = env
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ,
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize(("env", "strict"), [("1", "True"), (None, "False"), ("0", "False")])
def test_a_broker_process_reads_the_variable_it_inherits(env: str | None, strict: str) -> None:
    """What a broker or tool started by a test does as it imports pybroker."""
    code = "import pybroker, protocol.schema as s; print(s.STRICT)"
    assert _strict_in_a_process(env, code) == strict


def test_the_protocol_package_reads_no_environment() -> None:
    """Sans-I/O: the process decides, by `strict_encoding()`."""
    code = ("import protocol.schema as s; print(s.STRICT); s.strict_encoding(); "
            "print(s.STRICT)")
    assert _strict_in_a_process("1", code).split() == ["False", "True"]


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_misspelt_top_level_key_is_refused(encoder: str) -> None:
    with pytest.raises(UnknownField) as refused:
        ENCODERS[encoder](PRODUCE, _produce({}, throttle_time_msec=100), 9)
    message = str(refused.value)
    assert "ProduceResponse v9" in message and "'throttle_time_msec'" in message
    assert refused.value.path == "ProduceResponse" and "throttle_time_ms" in message


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_misspelt_nested_key_is_refused_with_its_path(encoder: str) -> None:
    with pytest.raises(UnknownField) as refused:
        ENCODERS[encoder](PRODUCE, _produce({"eror_code": 3}), 9)
    assert refused.value.key == "eror_code"
    assert refused.value.path == "ProduceResponse -> responses -> partition_responses"
    assert refused.value.message == "ProduceResponse v9"


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_misspelt_key_in_a_tagged_struct_is_refused(encoder: str) -> None:
    body = _produce({"current_leader": {"leader_id": 2, "leader_epok": 4}})
    with pytest.raises(UnknownField) as refused:
        ENCODERS[encoder](PRODUCE, body, 10)
    assert refused.value.path.endswith("partition_responses -> current_leader")


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_key_of_another_version_is_dropped(encoder: str) -> None:
    """Produce v0 has no throttle_time_ms, v2 no log_start_offset, v9 no current_leader:
    given anyway, they are left out, as in Kafka."""
    for version, partition, top in [(0, {}, {"throttle_time_ms": 100}),
                                    (2, {"log_start_offset": 7}, {}),
                                    (9, {"current_leader": {"leader_id": 1}}, {})]:
        full = ENCODERS[encoder](PRODUCE, _produce(partition, **top), version)
        assert full == ENCODERS[encoder](PRODUCE, _produce({}), version)


def test_a_null_struct_and_unknown_tags_pass() -> None:
    body = _produce({"current_leader": None})
    body["_unknown_tags"] = {7: b"x"}
    assert PRODUCE.decode(PRODUCE.encode(body, 10), 10)["_unknown_tags"] == {7: b"x"}


def _declaration() -> Message:
    return Message("ExampleResponse", -1, Versions(0, 1), Versions(1, None), (
        f("error_code", "int16"),
        f("items", [f("name", "string"), f("size", "int32", "1+")]),
        f("leader", struct([f("id", "int32")]), "1+", tag=0),
    ))


@pytest.mark.parametrize("strict", [True, False])
def test_off_the_check_is_not_built_in(monkeypatch: pytest.MonkeyPatch, strict: bool) -> None:
    """Without PYBROKER_STRICT_ENCODE, as in production, the builders carry no check and a
    misspelt key encodes as before: the default goes out."""
    monkeypatch.setattr(schema, "STRICT", strict)
    message = _declaration()
    good = {"error_code": 0, "items": [{"name": "a", "size": 1}], "leader": {"id": 1}}
    bad = {"error_code": 0, "items": [{"name": "a", "size": 1, "szie": 2}], "leader": {"id": 1}}
    assert (message.plain(1).known is not None) is strict
    if strict:
        with pytest.raises(UnknownField, match=r"ExampleResponse v1: .*'szie' at "
                                               r"ExampleResponse -> items"):
            message.encode(bad, 1)
    else:
        assert message.encode(bad, 1) == message.encode(good, 1)


def test_a_refusal_a_broker_logs_is_held_for_the_test() -> None:
    """A broker in this process logs the refusal and closes the connection; tests/conftest.py
    keeps what was logged and fails the test, whatever its client made of the closing."""
    from tests.conftest import _REFUSED

    try:
        PRODUCE.encode(_produce({"eror_code": 3}), 9)
    except UnknownField:
        logging.getLogger("pybroker.network.connection").exception("closing connection")
    try:
        assert len(_REFUSED.seen) == 1 and "'eror_code'" in _REFUSED.seen[0]
    finally:
        _REFUSED.seen.clear()
