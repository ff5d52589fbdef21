"""Share groups (KIP-932) with confluent-kafka's ShareConsumer, as its
users run it (librdkafka's defaults unless a case says otherwise).

Usage: share_consumers.py BOOTSTRAP CASE TOPIC GROUP

Cases (each prints what the Rust test asserts):
- four: four consumers on a one-partition topic; prints
  "four <records> <distinct> <duplicates> <consumers that got some>".
- explicit: explicit acknowledgement; offset 0 always released, 1 and 2
  released once, 3 and 4 rejected, the rest accepted; prints the
  deliveries seen per offset as "offset:count,count,...".
- holders: two consumers take records and never acknowledge them, one
  stopped (SIGSTOP, its connection open: its locks expire), one killed
  (SIGKILL); a third gets every record; prints
  "holders <held> <records> <distinct> <redelivered> <waited for the
  stopped one's locks: True/False>".
- hold (internal): the holder process of "holders".
"""

import os
import signal
import subprocess
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, CASE, TOPIC, GROUP = sys.argv[1:5]
DEADLINE = time.time() + 90


def create_topic():
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)


def produce(values):
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for value in values:
        producer.produce(TOPIC, value=value)
    assert producer.flush(30) == 0, "records left unsent"


def consumer(**extra):
    config = {"bootstrap.servers": BOOTSTRAP, "group.id": GROUP}
    config.update(extra)
    c = ShareConsumer(config)
    c.subscribe([TOPIC])
    return c


def records(messages):
    for m in messages:
        if m.error():
            raise SystemExit(f"error: {m.error()}")
        yield m


def warm_up(consumers, explicit=False):
    """A share group starts at the log end (share.auto.offset.reset
    latest) when it first reads a partition: produces a warm-up record
    until some consumer gets one, so the real records come after that."""
    got = False
    while not got:
        assert time.time() < DEADLINE, "no consumer ever got a warm-up record"
        produce([b"warm"])
        for c in consumers:
            for m in records(c.poll(0.5)):
                got |= m.value() == b"warm"
                if explicit:
                    c.acknowledge(m)


def case_four():
    count = 400
    consumers = [consumer(**{"max.poll.records": 20}) for _ in range(4)]
    warm_up(consumers)
    produce([b"r%d" % i for i in range(count)])
    seen = []
    per_consumer = [0] * 4
    lock = threading.Lock()

    def run(index, c):
        while time.time() < DEADLINE:
            with lock:
                if len(seen) >= count:
                    return
            for m in records(c.poll(0.5)):
                if m.value().startswith(b"r"):
                    time.sleep(0.002)  # the work each record takes
                    with lock:
                        seen.append(m.value())
                        per_consumer[index] += 1

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in consumers:
        c.close()
    distinct = len(set(seen))
    busy = sum(1 for n in per_consumer if n > 0)
    print(f"four {len(seen)} {distinct} {len(seen) - distinct} {busy}", flush=True)


def case_explicit():
    c = consumer(**{"share.acknowledgement.mode": "explicit"})
    warm_up([c], explicit=True)
    produce([b"e%d" % i for i in range(10)])
    deliveries = {}
    quiet_since = time.time()
    # Until every record is done and nothing came back for 5 s (locks
    # are 3 s in the test broker).
    while time.time() - quiet_since < 5 and time.time() < DEADLINE:
        got = list(records(c.poll(0.5)))
        if got:
            quiet_since = time.time()
        for m in got:
            if not m.value().startswith(b"e"):
                c.acknowledge(m)
                continue
            offset = int(m.value()[1:])
            deliveries.setdefault(offset, []).append(m.delivery_count())
            if offset == 0 or (offset in (1, 2) and m.delivery_count() == 1):
                c.acknowledge(m, AcknowledgeType.RELEASE)
            elif offset in (3, 4):
                c.acknowledge(m, AcknowledgeType.REJECT)
            else:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.close()
    for offset in sorted(deliveries):
        counts = ",".join(str(n) for n in deliveries[offset])
        print(f"{offset}:{counts}", flush=True)


def case_hold():
    """Takes records, says how many, then waits to be stopped or killed
    without acknowledging any."""
    c = consumer(**{"share.acknowledgement.mode": "explicit", "max.poll.records": 30})
    while time.time() < DEADLINE:
        got = []
        for m in records(c.poll(0.5)):
            if m.value().startswith(b"h"):
                got.append(m)
            else:
                c.acknowledge(m)
        if got:
            print(f"held {len(got)}", flush=True)
            break
    time.sleep(120)


def hold_and_stop(holders, count):
    """Once the holders joined, the records; each holder takes some, then
    one is stopped and the other killed. Returns how many they held."""
    time.sleep(3)
    produce([b"h%d" % i for i in range(count)])
    held = 0
    for h in holders:
        line = h.stdout.readline().strip()
        assert line.startswith("held "), f"a holder said {line!r}"
        held += int(line.split()[1])
    holders[0].send_signal(signal.SIGSTOP)
    holders[1].kill()
    return held


def case_holders():
    count = 100
    reader = consumer()
    warm_up([reader])
    script = os.path.abspath(__file__)
    holders = [
        subprocess.Popen(
            [sys.executable, script, BOOTSTRAP, "hold", TOPIC, GROUP],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    seen = []
    redelivered = 0
    try:
        held = hold_and_stop(holders, count)
        stopped_at = time.time()
        while len(set(seen)) < count and time.time() < DEADLINE:
            for m in records(reader.poll(0.5)):
                if m.value().startswith(b"h"):
                    seen.append(m.value())
                    redelivered += m.delivery_count() > 1
        waited = time.time() - stopped_at
    finally:
        for h in holders:
            h.kill()
            h.wait()
    reader.close()
    # The stopped holder's records came back when their locks expired
    # (3 s in the test broker), not before.
    print(f"holders {held} {len(seen)} {len(set(seen))} {redelivered} {waited >= 1.5}", flush=True)


if CASE != "hold":
    create_topic()
{"four": case_four, "explicit": case_explicit, "hold": case_hold, "holders": case_holders}[CASE]()
