"""kafka-python over TLS and/or SASL: its default producer (idempotent,
acks=all) sends 100 values "value-N" to partition 0 of TOPIC, then a
consumer reads them back from the start.

usage: secure_roundtrip.py BOOTSTRAP TOPIC SETTINGS_JSON [--produce-only]

SETTINGS_JSON: kafka-python's settings for both clients, e.g.
{"security_protocol": "SASL_SSL", "ssl_cafile": "ca.pem",
 "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
 "sasl_plain_password": "..."}

Prints "consumed 100 in order"; exits non-zero on any failure."""

import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    tls = json.loads(sys.argv[3])
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    futures = [
        producer.send(topic, value=f"value-{i}".encode(), partition=0) for i in range(100)
    ]
    producer.flush(timeout=60)
    for future in futures:
        future.get(timeout=60)
    producer.close(timeout=10)
    if "--produce-only" in sys.argv[4:]:
        print("produced 100")
        return

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10000, **tls)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == 100:
            break
    consumer.close()
    expected = [f"value-{i}" for i in range(100)]
    if values != expected:
        print("got", values[:5], "...", len(values), file=sys.stderr)
        sys.exit(1)
    print("consumed 100 in order")


if __name__ == "__main__":
    main()
