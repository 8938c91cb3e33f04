"""A confluent-kafka (librdkafka) consumer-protocol group member as a process of its own, so
that a scenario can kill it -9 (compat/clients/confluent.py's `start_consumer_member`).

    python -m compat.clients.confluent_member BOOTSTRAP GROUP (--topics T ... | --regex R)
                                              [--instance-id ID]

Prints each value it takes on a line of its own, committing it first; on SIGTERM it closes the
consumer (which leaves the group: epoch -1, or -2 for a static member) and exits.
"""
from __future__ import annotations

import argparse
import signal
import sys


def main(argv: list[str]) -> int:
    from confluent_kafka import Consumer, KafkaException
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("--topics", nargs="*", default=[])
    parser.add_argument("--regex")
    parser.add_argument("--instance-id")
    args = parser.parse_args(argv)
    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
              "group.protocol": "consumer", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    c = Consumer(config)
    # librdkafka takes a subscription starting with ^ as a regex (sent to the broker as
    # SubscribedTopicRegex under the consumer protocol)
    c.subscribe([args.regex] if args.regex else args.topics)
    try:
        while not stopping:
            m = c.poll(0.1)
            if m is None or m.error() is not None:
                continue
            try:  # the message's partition, at its offset + 1
                c.commit(message=m, asynchronous=False)
            except KafkaException:
                pass  # reconciling: the record may come again (at least once)
            sys.stdout.buffer.write((m.value() or b"") + b"\n")  # a null value: an empty line
            sys.stdout.flush()
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
