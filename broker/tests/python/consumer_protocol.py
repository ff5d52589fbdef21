"""confluent-kafka consumers with group.protocol=consumer (KIP-848), as a
user turns it on: a producer with its default settings sends COUNT values
to TOPIC (created with 6 partitions), then two consumers of GROUP read
them; the second joins once the first has every partition, so partitions
move from one to the other, revoked before they are assigned. Then each
commits, and the group's committed offsets are read back.

usage: consumer_protocol.py BOOTSTRAP TOPIC GROUP COUNT

Prints "seen N", "assigned A B" (each consumer's partition count at the
end), "committed" with the committed offsets matching each partition's
end; exits non-zero on any failure."""

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def fail(*what):
    print(*what, file=sys.stderr)
    sys.exit(1)


def consumer(bootstrap, group, name):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode())
    if producer.flush(60) != 0:
        fail("not every value was delivered")

    first = consumer(bootstrap, group, "first")
    first.subscribe([topic])
    seen = {}
    deadline = time.time() + 60
    consumers = [first]
    while time.time() < deadline:
        for c in consumers:
            message = c.poll(0.2)
            if message is None:
                continue
            if message.error():
                fail("consumer error:", message.error())
            seen[(message.partition(), message.offset())] = message.value().decode()
        if len(consumers) == 1 and len(first.assignment()) == 6:
            second = consumer(bootstrap, group, "second")
            second.subscribe([topic])
            consumers.append(second)
        settled = len(consumers) == 2 and all(len(c.assignment()) == 3 for c in consumers)
        if len(seen) >= count and settled:
            break
    if len(consumers) != 2:
        fail("the first consumer never got all six partitions:", first.assignment())
    sizes = [len(c.assignment()) for c in consumers]
    print("seen", len(seen))
    print("assigned", *sizes)
    if sorted(seen.values(), key=lambda v: int(v.split("-")[1])) != [f"value-{i}" for i in range(count)]:
        fail("values missing:", count - len(seen))
    if sizes != [3, 3]:
        fail("not balanced:", sizes)
    for c in consumers:
        c.commit(asynchronous=False)
    ends = {}
    for c in consumers:
        for tp in c.assignment():
            ends[tp.partition] = c.get_watermark_offsets(tp, timeout=10)[1]
    committed = first.committed([TopicPartition(topic, p) for p in range(6)], timeout=10)
    for tp in committed:
        if tp.offset != ends[tp.partition]:
            fail("partition", tp.partition, "committed", tp.offset, "end", ends[tp.partition])
    for c in consumers:
        c.close()
    print("committed")


if __name__ == "__main__":
    main()
