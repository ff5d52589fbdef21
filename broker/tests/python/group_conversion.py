"""A group moved between the two protocols through an empty group, as
docs/consumer-groups.md tells users to: a classic consumer (librdkafka's
default protocol) reads and commits, then a consumer with
group.protocol=consumer resumes the same group where it stopped, then a
classic one again. Each reads exactly the values written since the last
one closed.

usage: group_conversion.py BOOTSTRAP TOPIC GROUP

Prints "classic N", "consumer N", "classic N" (values each read, all
new) and exits non-zero if one read an older value or missed one."""

import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fail(*what):
    print(*what, file=sys.stderr, flush=True)
    sys.exit(1)


def write(bootstrap, topic, prefix, count):
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"{prefix}-{i}".encode())
    if producer.flush(60) != 0:
        fail("not delivered:", prefix)
    return {f"{prefix}-{i}" for i in range(count)}


def read(bootstrap, topic, group, protocol, wanted):
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        settings["group.protocol"] = "consumer"
    consumer = Consumer(settings)
    consumer.subscribe([topic])
    seen = set()
    deadline = time.time() + 60
    while time.time() < deadline and not wanted <= seen:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            fail(protocol, "consumer error:", message.error())
        seen.add(message.value().decode())
    # Anything more arriving now would be an older value read again.
    end = time.time() + 2
    while time.time() < end:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            seen.add(message.value().decode())
    consumer.commit(asynchronous=False)
    consumer.close()
    if seen != wanted:
        fail(protocol, "read", len(seen - wanted), "older values and missed", len(wanted - seen))
    print(protocol, len(seen), flush=True)


def main():
    bootstrap, topic, group = sys.argv[1:4]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    for step, protocol in enumerate(["classic", "consumer", "classic"]):
        wanted = write(bootstrap, topic, f"step{step}", 300)
        read(bootstrap, topic, group, protocol, wanted)


if __name__ == "__main__":
    main()
