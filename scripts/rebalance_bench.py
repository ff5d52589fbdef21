"""What a rebalance costs the members of a consumer group, one protocol at
a time (scripts/bench-rebalance.sh runs it): a producer writes 5,000
values a second over PARTITIONS partitions all along; MEMBERS consumers
(confluent-kafka, one thread each) share them; then one member joins and
later leaves. For each change: the time from it to a full, balanced
assignment (every partition owned, each member within one of the others),
and the longest gap in any of the original members' reads from the
change until one second after it settled (a stop-the-world rebalance
stops them all; an incremental one only moves what moves).

usage: rebalance_bench.py BOOTSTRAP PROTOCOL TOPIC [MEMBERS] [PARTITIONS] [WORK_MS]
  PROTOCOL: consumer (KIP-848), eager (classic, librdkafka's default
  range,roundrobin) or cooperative (classic, cooperative-sticky);
  WORK_MS: time each member spends on each batch it reads (0: none), as
  an application processing its records does (a classic rebalance waits
  for every member's next poll)

AUTO_COMMIT=0 in the environment turns the members' auto-commit off (it
is on, librdkafka's default, otherwise).

Prints the longest gap with no change ("<protocol> steady gap_ms M": the
fetch cadence, what a change's gap compares with), then one line per
change: "<protocol> <join|leave> settle_ms N gap_ms M"."""

import os
import sys
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fail(*what):
    print(*what, file=sys.stderr, flush=True)
    os._exit(1)


def settings(bootstrap, group, protocol):
    common = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "latest",
        "enable.auto.commit": os.environ.get("AUTO_COMMIT", "1") == "1",
    }
    if protocol == "consumer":
        return {**common, "group.protocol": "consumer"}
    if protocol == "cooperative":
        return {**common, "partition.assignment.strategy": "cooperative-sticky"}
    return common


class Member(threading.Thread):
    def __init__(self, config, topic, work):
        super().__init__(daemon=True)
        self.config, self.topic, self.work = config, topic, work
        self.reads = []  # monotonic times of reads
        self.assigned = 0
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def run(self):
        consumer = Consumer(self.config)
        consumer.subscribe([self.topic])
        while not self.stopping.is_set():
            messages = consumer.consume(100, 0.05)
            now = time.monotonic()
            self.reads.extend(now for m in messages if not m.error())
            self.assigned = len(consumer.assignment())
            if messages and self.work:
                time.sleep(self.work)
        consumer.close()
        self.closed.set()

    def stop(self):
        self.stopping.set()
        if not self.closed.wait(60):
            fail("a member did not close")

    def longest_gap(self, start, end):
        times = [start] + [t for t in self.reads if start <= t <= end] + [end]
        return max(b - a for a, b in zip(times, times[1:]))


class Writer(threading.Thread):
    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.stopping = threading.Event()

    def run(self):
        i = 0
        while not self.stopping.is_set():
            for _ in range(50):
                self.producer.produce(self.topic, key=str(i).encode(), value=b"x" * 100)
                i += 1
            self.producer.poll(0)
            time.sleep(0.01)
        self.producer.flush(30)


def balanced(members, partitions):
    counts = [m.assigned for m in members]
    return sum(counts) == partitions and max(counts) - min(counts) <= 1


def settle(members, partitions, limit=120):
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if balanced(members, partitions):
            return time.monotonic()
        time.sleep(0.01)
    fail("no balanced assignment within", limit, "s:", [m.assigned for m in members])


def measure(protocol, change, originals, members, partitions, changed_at):
    settled = settle(members, partitions)
    time.sleep(1)
    gap = max(m.longest_gap(changed_at, settled + 1) for m in originals)
    print(protocol, change, "settle_ms", round((settled - changed_at) * 1000),
          "gap_ms", round(gap * 1000), flush=True)


def main():
    bootstrap, protocol, topic = sys.argv[1:4]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    partitions = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    work = int(sys.argv[6]) / 1000 if len(sys.argv) > 6 else 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    writer = Writer(bootstrap, topic)
    writer.start()
    config = settings(bootstrap, f"{topic}-group", protocol)
    members = [Member(config, topic, work) for _ in range(count)]
    for m in members:
        m.start()
    settle(members, partitions)
    steady_from = time.monotonic()
    time.sleep(3)
    steady = max(m.longest_gap(steady_from, time.monotonic()) for m in members)
    print(protocol, f"work={round(work * 1000)}ms", "steady gap_ms", round(steady * 1000), flush=True)
    joining = Member(config, topic, work)
    joined_at = time.monotonic()
    joining.start()
    measure(protocol, "join", members, members + [joining], partitions, joined_at)
    time.sleep(2)
    left_at = time.monotonic()
    joining.stop()
    measure(protocol, "leave", members, members, partitions, left_at)
    writer.stopping.set()
    for m in members:
        m.stopping.set()
    for m in members:
        m.closed.wait(60)


if __name__ == "__main__":
    main()
