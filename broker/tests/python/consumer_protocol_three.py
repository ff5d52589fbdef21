"""The consumer group protocol (KIP-848) as a user runs it, with
confluent-kafka (`group.protocol=consumer`): a producer with its default
settings writes keyed values to TOPIC (6 partitions) all along; members
A and B share it, C joins (two partitions each), B leaves, then everyone
stops and three new members resume from the committed offsets. Each
member commits what it read when partitions are revoked from it (and on
close), as an at-least-once consumer does.

usage: consumer_protocol_three.py BOOTSTRAP TOPIC GROUP

Prints:
  join gap_ms A B         longest gap in A's and B's reads while C joined
  join min_assigned A B   the fewest partitions A and B held meanwhile
  seen N delivered M duplicates D
  resumed N reread R      after the restart: new values read, old ones again
Exits non-zero when a step does not happen in time."""

import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fail(*what):
    print(*what, file=sys.stderr, flush=True)
    os._exit(1)  # from any thread


class Member(threading.Thread):
    """One consumer on a thread of its own: what it read and when, and its
    assignment's size over time."""

    def __init__(self, bootstrap, topic, group, name):
        super().__init__(daemon=True)
        self.settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        self.topic, self.name = topic, name
        self.reads = []  # (monotonic time, value)
        self.sizes = []  # (monotonic time, assignment size)
        self.assigned = 0
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def revoked(self, consumer, _partitions):
        try:
            consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing read since the last commit

    def run(self):
        consumer = Consumer(self.settings)
        consumer.subscribe([self.topic], on_revoke=self.revoked)
        while not self.stopping.is_set():
            message = consumer.poll(0.05)
            size = len(consumer.assignment())
            if size != self.assigned:
                self.assigned = size
                self.sizes.append((time.monotonic(), size))
            if message is None:
                continue
            if message.error():
                fail(self.name, "consumer error:", message.error())
            self.reads.append((time.monotonic(), message.value().decode()))
        consumer.close()
        self.closed.set()

    def stop(self):
        self.stopping.set()
        if not self.closed.wait(30):
            fail(self.name, "did not close")

    def longest_gap_ms(self, start, end):
        times = [start] + [t for t, _ in self.reads if start <= t <= end] + [end]
        return max(b - a for a, b in zip(times, times[1:])) * 1000

    def fewest_assigned(self, start, end):
        before = [s for t, s in self.sizes if t < start]
        during = [s for t, s in self.sizes if start <= t <= end]
        return min(before[-1:] + during)


class Writer(threading.Thread):
    """A producer with default settings, 2000 values a second until
    stopped; what was delivered."""

    def __init__(self, bootstrap, topic, prefix):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.topic, self.prefix = topic, prefix
        self.delivered = set()
        self.stopping = threading.Event()

    def delivered_one(self, err, message):
        if err is None:
            self.delivered.add(message.value().decode())

    def run(self):
        i = 0
        while not self.stopping.is_set():
            for _ in range(20):
                value = f"{self.prefix}-{i}"
                self.producer.produce(
                    self.topic, key=str(i).encode(), value=value.encode(), on_delivery=self.delivered_one
                )
                i += 1
            self.producer.poll(0)
            time.sleep(0.01)
        if self.producer.flush(60) != 0:
            fail("not every value was delivered")


def wait_for(what, condition, limit=60):
    deadline = time.time() + limit
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    fail("timed out waiting for", what)


def sizes(members):
    return [m.assigned for m in members]


def main():
    bootstrap, topic, group = sys.argv[1:4]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    writer = Writer(bootstrap, topic, "first")
    writer.start()
    a, b, c = (Member(bootstrap, topic, group, n) for n in "ABC")
    a.start()
    b.start()
    wait_for("A and B to share six partitions", lambda: sizes([a, b]) == [3, 3])
    time.sleep(1)
    joined = time.monotonic()
    c.start()
    wait_for("two partitions each", lambda: sizes([a, b, c]) == [2, 2, 2])
    settled = time.monotonic() + 1
    time.sleep(1)
    print("join gap_ms", *(round(m.longest_gap_ms(joined, settled)) for m in (a, b)))
    print("join min_assigned", *(m.fewest_assigned(joined, settled) for m in (a, b)))
    b.stop()
    wait_for("A and C to take B's partitions", lambda: sizes([a, c]) == [3, 3])
    time.sleep(1)
    writer.stopping.set()
    writer.join(90)
    members = (a, b, c)
    read = lambda: {v for m in members for _, v in m.reads}
    wait_for("everything delivered to be read", lambda: writer.delivered <= read())
    a.stop()
    c.stop()
    all_reads = [v for m in members for _, v in m.reads]
    print("seen", len(read() & writer.delivered), "delivered", len(writer.delivered),
          "duplicates", len(all_reads) - len(set(all_reads)))
    # Restart: 600 new values; three new members resume where the group
    # committed.
    later = Producer({"bootstrap.servers": bootstrap})
    for i in range(600):
        later.produce(topic, key=str(i).encode(), value=f"later-{i}".encode())
    if later.flush(60) != 0:
        fail("the later values were not delivered")
    resumed = [Member(bootstrap, topic, group, n) for n in "DEF"]
    for m in resumed:
        m.start()
    new_reads = lambda: [v for m in resumed for _, v in m.reads]
    wait_for("the later values", lambda: len({v for v in new_reads() if v.startswith("later-")}) == 600)
    time.sleep(2)
    for m in resumed:
        m.stop()
    values = new_reads()
    print("resumed", len({v for v in values if v.startswith("later-")}),
          "reread", sum(1 for v in values if not v.startswith("later-")), flush=True)


if __name__ == "__main__":
    main()
