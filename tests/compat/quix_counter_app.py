"""A Quix Streams application that counts records per key in a RocksDB store (whose
changelog topic Quix creates), run by tests/compat/test_python_streams.py as a user would run
it: `python quix_counter_app.py BOOTSTRAP IN OUT STATE_DIR COUNT`. It stops after COUNT
outputs (or 60 s without input) and prints them, one JSON line of [key, count] pairs."""
import json
import sys

from quixstreams import Application, State

bootstrap, source, sink, state_dir, expected = sys.argv[1:]

app = Application(broker_address=bootstrap, consumer_group="quix-counter",
                  auto_offset_reset="earliest", state_dir=state_dir)
words = app.topic(source, key_deserializer="str", value_deserializer="str")
counts = app.topic(sink, key_serializer="str", value_serializer="json")


def count(value: str, state: State) -> int:
    total = state.get("count", 0) + 1
    state.set("count", total)
    return total


sdf = app.dataframe(words).apply(count, stateful=True)
sdf.to_topic(counts)
outputs = app.run(count=int(expected), timeout=60, metadata=True)
print(json.dumps([[row["_key"], row["_value"]] for row in outputs]))
