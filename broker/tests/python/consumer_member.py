"""One confluent-kafka consumer with group.protocol=consumer (KIP-848)
that reports its assignment: creates TOPIC (6 partitions) if missing
(a TOPIC starting with "^" is a regular expression, made by nobody),
subscribes (reading from the earliest offset, committing every second),
and prints "assigned N" then "owns P,Q,..." each time its
assignment changes, until it is killed, SIGTERM closes it (a static
member leaves for now), or LIMIT_S seconds pass.

usage: consumer_member.py BOOTSTRAP TOPIC GROUP LIMIT_S [INSTANCE_ID]"""

import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

stopping = False


def stop(_signum, _frame):
    global stopping
    stopping = True


def main():
    bootstrap, topic, group, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    signal.signal(signal.SIGTERM, stop)
    if not topic.startswith("^"):  # a regular expression names no topic to make
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
        except KafkaException as e:
            if "already exists" not in str(e):
                raise
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "auto.commit.interval.ms": 1000,
    }
    if len(sys.argv) > 5:
        settings["group.instance.id"] = sys.argv[5]
    consumer = Consumer(settings)
    consumer.subscribe([topic])
    last = None
    deadline = time.time() + limit
    while time.time() < deadline and not stopping:
        consumer.poll(0.2)
        owned = sorted(tp.partition for tp in consumer.assignment())
        if owned != last:
            print("assigned", len(owned), flush=True)
            print("owns", ",".join(map(str, owned)), flush=True)
            last = owned
    consumer.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
