"""kafka-python as a second, independent client: joins a consumer group,
consumes every message of a topic and commits.

usage: consume_group.py BOOTSTRAP TOPIC GROUP COUNT

Prints "partition offset" per message, then "committed". Exits non-zero if
COUNT messages do not arrive within 60 seconds."""

import sys
import time

from kafka import KafkaConsumer


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = KafkaConsumer(
        topic,
        group_id=group,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    seen = set()
    deadline = time.time() + 60
    while len(seen) < count and time.time() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                if (record.partition, record.offset) not in seen:
                    seen.add((record.partition, record.offset))
                    print(record.partition, record.offset)
    if len(seen) < count:
        print(f"only {len(seen)} of {count} messages", file=sys.stderr)
        sys.exit(1)
    consumer.commit()
    print("committed")
    consumer.close()


if __name__ == "__main__":
    main()
