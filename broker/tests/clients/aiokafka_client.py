"""aiokafka (asyncio) against the broker, as its users write it: the admin
client creates and lists a topic, a producer with its DEFAULT settings
sends keyed values, a consumer in a group reads them all and commits.

usage: aiokafka_client.py BOOTSTRAP TOPIC GROUP COUNT

Prints "listed TOPIC", "acked COUNT", "record PARTITION OFFSET KEY VALUE"
per message read and "committed"; broker/tests/clients.rs checks them.
Exits non-zero on any error or if COUNT messages do not arrive in 60 s."""

import asyncio
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def admin(bootstrap, topic):
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        await client.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        if topic in await client.list_topics():
            print("listed", topic, flush=True)
    finally:
        await client.close()


async def produce(bootstrap, topic, count):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        sends = [
            await producer.send(topic, key=f"key-{i % 7}".encode(), value=f"value-{i}".encode())
            for i in range(count)
        ]
        for sent in sends:
            await sent
        print("acked", len(sends), flush=True)
    finally:
        await producer.stop()


async def consume(bootstrap, topic, group, count):
    consumer = AIOKafkaConsumer(
        topic,
        group_id=group,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        seen = 0
        deadline = time.time() + 60
        while seen < count and time.time() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for r in records:
                    seen += 1
                    print("record", r.partition, r.offset, r.key.decode(), r.value.decode())
        if seen < count:
            sys.exit(f"only {seen} of {count} messages")
        await consumer.commit()
        print("committed", flush=True)
    finally:
        await consumer.stop()


async def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    await admin(bootstrap, topic)
    await produce(bootstrap, topic, count)
    await consume(bootstrap, topic, group, count)


if __name__ == "__main__":
    asyncio.run(main())
