"""kafka-python 3.x's transactional producer with its defaults otherwise:
commits 20 values "kp-c-N", aborts 10 "kp-a-N" (sent and flushed first, so
they reach the log), to partition 0 of TOPIC.

usage: transactions_kafka_python.py BOOTSTRAP TOPIC

Prints "kafka-python committed 20, aborted 10"; exits non-zero on failure."""

import sys

from kafka import KafkaProducer


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(20):
        producer.send(topic, value=f"kp-c-{i}".encode(), partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(10):
        producer.send(topic, value=f"kp-a-{i}".encode(), partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    print("kafka-python committed 20, aborted 10")


if __name__ == "__main__":
    main()
