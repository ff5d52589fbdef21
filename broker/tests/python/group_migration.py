"""A group with members moved online between the protocols, as Kafka 4's
group.consumer.migration.policy=bidirectional does: two classic consumers
(librdkafka's defaults) read a six-partition topic while a producer
writes; a third consumer with group.protocol=consumer joins (the group
becomes a consumer group and all three get two partitions, the classic
ones through JoinGroup); it leaves (the group is classic again, the two
share the six). Every value written is read, and no partition is held by
two consumers at once (each consumer's assign/revoke callbacks, in time).

usage: group_migration.py BOOTSTRAP TOPIC GROUP BROKER_BINARY

Prints one line per stage ("classic 3 3", "consumer 2 2 2",
"classic 3 3", then "read N of N"), and what `broker group describe`
printed while the group was a consumer group with classic members;
exits non-zero on a failure."""

import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

EVENTS = []  # (monotonic time, consumer, "assign" | "revoke", partition)
EVENTS_LOCK = threading.Lock()


def fail(*what):
    print(*what, file=sys.stderr, flush=True)
    sys.exit(1)


class Member(threading.Thread):
    """One consumer polling in its own thread."""

    def __init__(self, name, bootstrap, topic, group, protocol):
        super().__init__(daemon=True)
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
        }
        if protocol == "consumer":
            settings["group.protocol"] = "consumer"
        self.name_ = name
        self.consumer = Consumer(settings)
        self.topic = topic
        self.seen = set()
        self.owned = set()
        self.errors = []
        self.stop = threading.Event()

    def note(self, kind, partitions):
        now = time.monotonic()
        with EVENTS_LOCK:
            for p in partitions:
                EVENTS.append((now, self.name_, kind, p))
                if kind == "assign":
                    self.owned.add(p)
                else:
                    self.owned.discard(p)

    def run(self):
        self.consumer.subscribe(
            [self.topic],
            on_assign=lambda c, ps: self.note("assign", [p.partition for p in ps]),
            on_revoke=lambda c, ps: self.note("revoke", [p.partition for p in ps]),
            on_lost=lambda c, ps: self.note("revoke", [p.partition for p in ps]),
        )
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                self.errors.append(str(message.error()))
                continue
            self.seen.add(message.value().decode())
        self.consumer.close()
        # Closed, it holds nothing (whether or not a callback said so).
        self.note("revoke", list(self.owned))

    def holds(self):
        with EVENTS_LOCK:
            return len(self.owned)


class Writer(threading.Thread):
    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.topic = topic
        self.delivered = set()
        self.stop = threading.Event()

    def run(self):
        i = 0

        def delivered(err, message):
            if err is None:
                self.delivered.add(message.value().decode())

        while not self.stop.is_set():
            self.producer.produce(self.topic, key=str(i).encode(), value=f"v-{i}".encode(),
                                  on_delivery=delivered)
            self.producer.poll(0)
            i += 1
            time.sleep(0.005)
        if self.producer.flush(60) != 0:
            fail("not delivered")


def group_type(admin, group):
    listed = admin.list_consumer_groups().result()
    for g in listed.valid:
        if g.group_id == group:
            return str(g.type).split(".")[-1].lower()
    return None


def wait_for(what, check, limit=90):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            if check():
                return
        except KafkaException:
            pass
        time.sleep(0.2)
    fail("timed out waiting for", what)


def no_partition_held_twice():
    """Replays the callbacks in time order: an assign of a partition
    another consumer holds is a double owner."""
    holder = {}
    for at, who, kind, partition in sorted(EVENTS):
        if kind == "assign":
            if holder.get(partition) not in (None, who):
                fail(f"partition {partition} assigned to {who} while {holder[partition]} held it")
            holder[partition] = who
        elif holder.get(partition) == who:
            del holder[partition]


def main():
    bootstrap, topic, group, broker = sys.argv[1:5]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    writer = Writer(bootstrap, topic)
    writer.start()
    a = Member("a", bootstrap, topic, group, "classic")
    b = Member("b", bootstrap, topic, group, "classic")
    a.start()
    b.start()
    wait_for("two classic members", lambda: a.holds() + b.holds() == 6 and
             min(a.holds(), b.holds()) > 0 and group_type(admin, group) == "classic")
    print("classic", a.holds(), b.holds(), flush=True)
    c = Member("c", bootstrap, topic, group, "consumer")
    c.start()
    wait_for("an upgraded group of three",
             lambda: [a.holds(), b.holds(), c.holds()] == [2, 2, 2] and
             group_type(admin, group) == "consumer")
    print("consumer", a.holds(), b.holds(), c.holds(), flush=True)
    described = subprocess.run([broker, "group", "describe", group, "--brokers", bootstrap],
                               capture_output=True, text=True, timeout=30)
    c.stop.set()
    c.join(30)
    wait_for("a classic group again",
             lambda: a.holds() + b.holds() == 6 and min(a.holds(), b.holds()) > 0 and
             group_type(admin, group) == "classic")
    print("classic", a.holds(), b.holds(), flush=True)
    writer.stop.set()
    writer.join(90)
    wait_for("every value read", lambda: writer.delivered <= (a.seen | b.seen | c.seen), 60)
    for m in (a, b):
        m.stop.set()
        m.join(30)
    errors = a.errors + b.errors + c.errors
    if errors:
        fail("consumer errors:", errors[:5])
    no_partition_held_twice()
    read = len(writer.delivered & (a.seen | b.seen | c.seen))
    print("read", read, "of", len(writer.delivered), flush=True)
    print(described.stdout, flush=True)


if __name__ == "__main__":
    main()
