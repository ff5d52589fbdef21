"""One confluent-kafka consumer with group.protocol=consumer (KIP-848)
that reports its assignment: creates TOPIC (6 partitions) if missing,
subscribes, and prints "assigned N" each time its partition count
changes, until it is killed or LIMIT_S seconds pass.

usage: consumer_member.py BOOTSTRAP TOPIC GROUP LIMIT_S"""

import sys
import time

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def main():
    bootstrap, topic, group, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    except KafkaException as e:
        if "already exists" not in str(e):
            raise
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}
    )
    consumer.subscribe([topic])
    last = None
    deadline = time.time() + limit
    while time.time() < deadline:
        consumer.poll(0.2)
        count = len(consumer.assignment())
        if count != last:
            print("assigned", count, flush=True)
            last = count
    consumer.close()


if __name__ == "__main__":
    main()
