"""Reads partition 0 of a topic from offset 0 up to an offset with
confluent-kafka (librdkafka), as a consumer replaying old data does, and
prints the time to the first batch (a consumer asking for one byte: a
cold remote read when the broker's chunk cache is empty) and the rate
of the whole read.

Usage: tiered_bench.py BOOTSTRAP TOPIC STOP_OFFSET LABEL
Prints one line: LABEL first_batch_ms=... mb_per_s=... records=...
"""
import sys
import time

from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, stop, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": f"tiered-bench-{label}",
    "enable.auto.commit": False,
    "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 8388608,
})
# The first batch alone (a consumer asking for one byte gets one whole
# batch), its connection and metadata ready first: the time to the first
# record is the broker's first read (from the store when the cache is cold).
def first_batch_ms(offset):
    probe = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"tiered-bench-probe-{label}",
        "enable.auto.commit": False,
        "max.partition.fetch.bytes": 1,
    })
    probe.list_topics(topic, timeout=10)
    probe_started = time.monotonic()
    probe.assign([TopicPartition(topic, 0, offset)])
    first_message = None
    while first_message is None and time.monotonic() < probe_started + 60:
        first_message = probe.poll(1.0)
    elapsed = (time.monotonic() - probe_started) * 1000
    probe.close()
    return elapsed


# The very first (the broker's first store calls: its manifest, the
# segment's index, a chunk), then one in the middle (another segment:
# its index and a chunk, the store's connections warm).
first_byte_ms = first_batch_ms(0)
middle_ms = first_batch_ms(stop // 2)
consumer.list_topics(topic, timeout=10)
started = time.monotonic()
consumer.assign([TopicPartition(topic, 0, 0)])
first = None
records = 0
payload_bytes = 0
deadline = started + 600
while True:
    if time.monotonic() > deadline:
        sys.exit(f"{label}: read {records} records in 600 s, stopped")
    messages = consumer.consume(num_messages=10000, timeout=1.0)
    done = False
    for message in messages:
        if message.error():
            sys.exit(f"{label}: {message.error()}")
        if first is None:
            first = time.monotonic()
        records += 1
        payload_bytes += len(message.value() or b"") + len(message.key() or b"")
        if message.offset() + 1 >= stop:
            done = True
            break
    if done:
        break
ended = time.monotonic()
consumer.close()
seconds = max(ended - started, 1e-9)
print(f"{label} first_batch_ms={first_byte_ms:.1f} another_segment_ms={middle_ms:.1f} mb_per_s={payload_bytes / seconds / 1e6:.1f} "
      f"records={records} seconds={seconds:.2f}")
