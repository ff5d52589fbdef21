"""Reads partition 0 of a topic from offset 0 up to an offset with
confluent-kafka (librdkafka), as a consumer replaying old data does, and
prints the time to the first record (the first byte: a cold remote read
when the broker's chunk cache is empty) and the rate of the whole read.

Usage: tiered_bench.py BOOTSTRAP TOPIC STOP_OFFSET LABEL
Prints one line: LABEL first_byte_ms=... mb_per_s=... records=...
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
# Metadata first, so the first record's time is the read's, not the
# connection's.
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
print(f"{label} first_byte_ms={(first - started) * 1000:.1f} mb_per_s={payload_bytes / seconds / 1e6:.1f} "
      f"records={records} seconds={seconds:.2f}")
