"""Share groups against a consumer group on one partition, with
confluent-kafka (librdkafka) clients: scripts/bench-share.sh runs it.

Usage:
  share_bench.py BOOTSTRAP rate share|group TOPIC CONSUMERS DELAY_MS SECONDS BROKER_PID
      CONSUMERS consumers of one group (a share group, or a consumer
      group) each take DELAY_MS per message; once all joined, a backlog
      is produced; prints "<mode> <consumers> <acknowledged msgs/s>
      <broker CPU us per message>" over SECONDS.
  share_bench.py BOOTSTRAP redelivery TOPIC ROUNDS
      A member takes one record and never acknowledges it; another gets
      it once the lock (the broker's, 1 s in the bench) expires; prints
      "redelivery <rounds> <p50 ms> <max ms>" of the time from the first
      delivery to the second.
"""

import sys
import threading
import time

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, MODE = sys.argv[1:3]


def create(topic):
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def produce(topic, count, size=100):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5})
    value = b"x" * size
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def rate(kind, topic, consumers, delay_ms, seconds, broker_pid):
    create(topic)
    group = f"{topic}-group"
    counts = [0] * consumers
    joined = [False] * consumers
    measuring = threading.Event()
    stop = threading.Event()

    def run(index):
        if kind == "share":
            c = ShareConsumer({"bootstrap.servers": BOOTSTRAP, "group.id": group})
        else:
            c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group,
                          "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        while not stop.is_set():
            got = c.poll(0.1) if kind == "share" else c.consume(num_messages=500, timeout=0.1)
            joined[index] = True
            for m in got or []:
                if m.error():
                    continue
                time.sleep(delay_ms / 1000)  # the work each message takes
                if measuring.is_set():
                    counts[index] += 1
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    while not all(joined):
        time.sleep(0.1)
    time.sleep(2)  # every member assigned
    # A backlog larger than all of them can take in the run.
    possible = int(consumers * seconds * 1000 / max(delay_ms, 0.1) * 1.5) + 1000
    produce(topic, possible)
    time.sleep(1)
    ticks = cpu_ticks(broker_pid)
    measuring.set()
    time.sleep(seconds)
    measuring.clear()
    ticks = cpu_ticks(broker_pid) - ticks
    stop.set()
    for t in threads:
        t.join()
    done = sum(counts)
    per_message_us = ticks / 100 * 1e6 / max(done, 1)
    print(f"{kind} {consumers} {done / seconds:.0f} {per_message_us:.0f}", flush=True)


def redelivery(topic, rounds):
    create(topic)
    group = f"{topic}-group"
    holder = ShareConsumer({"bootstrap.servers": BOOTSTRAP, "group.id": group,
                            "share.acknowledgement.mode": "explicit", "max.poll.records": 1})
    other = ShareConsumer({"bootstrap.servers": BOOTSTRAP, "group.id": group})
    holder.subscribe([topic])
    other.subscribe([topic])
    for c in (holder, other):
        c.poll(1.0)
    latencies = []
    for _ in range(rounds):
        produce(topic, 1)
        first = []
        while not first:
            first = [m for m in holder.poll(0.5) if not m.error()]
        held_at = time.time()
        offset = first[0].offset()
        # The holder keeps it (explicit mode, never acknowledged) and asks
        # for nothing more; the other member waits for it.
        while True:
            again = [m for m in other.poll(0.1) if not m.error() and m.offset() == offset]
            if again:
                latencies.append((time.time() - held_at) * 1000)
                break
        try:
            holder.acknowledge(first[0])  # refused by the broker: no longer held
        except Exception:
            pass
    latencies.sort()
    print(f"redelivery {rounds} {latencies[len(latencies) // 2]:.0f} {latencies[-1]:.0f}", flush=True)
    for c in (holder, other):
        c.close()


if MODE == "rate":
    kind, topic, consumers, delay_ms, seconds, pid = sys.argv[3:9]
    rate(kind, topic, int(consumers), float(delay_ms), int(seconds), int(pid))
else:
    redelivery(sys.argv[3], int(sys.argv[4]))
