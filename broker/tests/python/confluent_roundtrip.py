"""confluent-kafka (librdkafka, the version its wheel bundles) with its
default settings plus the given security ones: a producer sends 100 values
"value-N" to partition 0 of TOPIC, then a consumer in group GROUP reads
them back from the start.

usage: confluent_roundtrip.py BOOTSTRAP TOPIC GROUP SETTINGS_JSON

SETTINGS_JSON: librdkafka's settings for both clients, e.g.
{"security.protocol": "SASL_SSL", "ssl.ca.location": "ca.pem",
 "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
 "sasl.password": "..."}

Prints "consumed 100 in order"; exits non-zero on any failure."""

import json
import sys
import time

from confluent_kafka import Consumer, Producer


def main():
    bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    security = json.loads(sys.argv[4])
    producer = Producer({"bootstrap.servers": bootstrap, **security})
    failures = []

    def delivered(error, _message):
        if error is not None:
            failures.append(error)

    for i in range(100):
        producer.produce(topic, value=f"value-{i}".encode(), partition=0, on_delivery=delivered)
    if producer.flush(60) != 0 or failures:
        print("not delivered:", failures[:3], file=sys.stderr)
        sys.exit(1)

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", **security}
    )
    consumer.subscribe([topic])
    values = []
    deadline = time.time() + 60
    while len(values) < 100 and time.time() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            print("consumer error:", message.error(), file=sys.stderr)
            sys.exit(1)
        values.append(message.value().decode())
    consumer.close()
    expected = [f"value-{i}" for i in range(100)]
    if values != expected:
        print("got", values[:5], "...", len(values), file=sys.stderr)
        sys.exit(1)
    print("consumed 100 in order")


if __name__ == "__main__":
    main()
