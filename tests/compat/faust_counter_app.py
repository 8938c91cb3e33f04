"""A faust-streaming worker whose agent counts records per key in a Table (RocksDB under the
data dir, with the changelog topic faust creates), run by tests/compat/test_python_streams.py
as a user would run it: `python faust_counter_app.py worker`, configured by the environment
(COUNTER_BOOTSTRAP, COUNTER_SOURCE, COUNTER_DATADIR). Each new count goes to
`<COUNTER_SOURCE>-counts` (key, JSON count), where the test reads it."""
import os

import faust

source = os.environ["COUNTER_SOURCE"]
app = faust.App("faust-counter", broker=f"kafka://{os.environ['COUNTER_BOOTSTRAP']}",
                datadir=os.environ["COUNTER_DATADIR"], store="rocksdb://", web_enabled=False,
                topic_partitions=2)
words = app.topic(source, key_serializer="raw", value_serializer="raw")
sink = app.topic(f"{source}-counts", key_serializer="raw", value_serializer="json")
counts = app.Table("counts", default=int, partitions=2)


@app.agent(words)
async def count(stream: faust.StreamT) -> None:
    async for event in stream.events():
        key = event.key.decode()
        counts[key] += 1
        await sink.send(key=key, value=counts[key])


if __name__ == "__main__":
    app.main()
