"""DeleteRecords with confluent-kafka's admin client: prints the outcome
of deleting the records of partition 0 of a topic below an offset, as
`deleted <low watermark>` or `error <Kafka error name>`.

Usage: delete_records.py BOOTSTRAP TOPIC OFFSET
"""
import sys

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

bootstrap, topic, offset = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
futures = admin.delete_records([TopicPartition(topic, 0, offset)], request_timeout=20)
for partition, future in futures.items():
    try:
        result = future.result()
        print(f"deleted {result.low_watermark}")
    except Exception as e:  # the KafkaException carries the broker's error
        error = e.args[0] if e.args else e
        print(f"error {getattr(error, 'name', lambda: str(error))()}")
