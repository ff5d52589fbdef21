"""kafka-python's producer with its DEFAULT settings (3.x: idempotence on,
acks=all): sends COUNT values "value-N" in order to one partition and
waits for every acknowledgement.

usage: produce_default.py BOOTSTRAP TOPIC COUNT

Prints "idempotent True|False" and "acked COUNT"; exits non-zero on any
failed send."""

import sys

from kafka import KafkaProducer


def main():
    bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    print("idempotent", bool(producer.config.get("enable_idempotence")), flush=True)
    futures = [
        producer.send(topic, value=f"value-{i}".encode(), partition=0) for i in range(count)
    ]
    producer.flush(timeout=60)
    for future in futures:
        future.get(timeout=60)
    print("acked", len(futures), flush=True)
    producer.close(timeout=10)


if __name__ == "__main__":
    main()
