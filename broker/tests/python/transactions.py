"""confluent-kafka's transactional producer, as an application uses it, with
librdkafka's defaults otherwise:

1. Producer "tx-1" (transactional.id) commits 50 values, aborts 30, commits
   20 more, over every partition of TOPIC.
2. A zombie: producer "tx-z" begins a transaction and sends 10 values (they
   reach the log); a second instance with the same transactional.id
   initialises, which fences the first and aborts its open transaction.
   The first's commit must fail as fenced; the second commits 10 values.
3. Consume-transform-produce: 60 values in TOPIC-in are read by a consumer
   in group "ctp" and written transformed ("t-<value>") to TOPIC by a
   transactional producer, with the consumer's offsets sent to each
   transaction (send_offsets_to_transaction); one transaction is aborted
   and its input read again from the committed offsets. The group's
   committed offsets end at TOPIC-in's end.
4. A read_committed consumer (librdkafka's default) reads every partition
   from the start to its end: exactly the committed values, each once, in
   each partition's order. A read_uncommitted one also sees the aborted
   ones (the log holds them; the markers hide them).
5. Every partition's last stable offset reached its high watermark (the
   committed consumer's position reaches the end).

usage: transactions.py BOOTSTRAP TOPIC PARTITIONS (TOPIC-in must exist);
GROUP_PROTOCOL=consumer in the environment runs step 3's consumer with
group.protocol=consumer (KIP-848)

Prints a summary line; exits non-zero on any failure."""

import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def fail(*why):
    print("FAIL:", *why, file=sys.stderr)
    sys.exit(1)


def transactional(bootstrap, txn_id):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
        }
    )
    producer.init_transactions(60)
    return producer


def send(producer, topic, partitions, prefix, count):
    for i in range(count):
        producer.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % partitions)


def committed_and_aborted(bootstrap, topic, partitions):
    producer = transactional(bootstrap, "tx-1")
    producer.begin_transaction()
    send(producer, topic, partitions, "c1", 50)
    producer.commit_transaction(60)
    producer.begin_transaction()
    send(producer, topic, partitions, "a1", 30)
    producer.flush(60)  # the aborted values reach the log first
    producer.abort_transaction(60)
    producer.begin_transaction()
    send(producer, topic, partitions, "c2", 20)
    producer.commit_transaction(60)
    return {f"c1-{i}" for i in range(50)} | {f"c2-{i}" for i in range(20)}, {
        f"a1-{i}" for i in range(30)
    }


def zombie_fenced(bootstrap, topic, partitions):
    old = transactional(bootstrap, "tx-z")
    old.begin_transaction()
    send(old, topic, partitions, "zold", 10)
    old.flush(60)
    new = transactional(bootstrap, "tx-z")
    try:
        old.commit_transaction(30)
        fail("the fenced producer committed")
    except KafkaException as e:
        error = e.args[0]
        if not (error.fatal() or "fenced" in str(error).lower()):
            fail("the fenced producer's commit failed, but not as fenced:", error)
    new.begin_transaction()
    send(new, topic, partitions, "znew", 10)
    new.commit_transaction(60)
    return {f"znew-{i}" for i in range(10)}, {f"zold-{i}" for i in range(10)}


def committed_when_stable(consumer, partitions):
    """The group's committed offsets, asked again while a transaction's
    offsets await its marker (UNSTABLE_OFFSET_COMMIT is retriable: an
    abort or commit returns before its markers are written)."""
    deadline = time.time() + 30
    while True:
        try:
            return consumer.committed(partitions, timeout=30)
        except KafkaException as e:
            if e.args[0].code() != 88 or time.time() > deadline:
                raise
            time.sleep(0.1)


def consume_transform_produce(bootstrap, topic, partitions):
    source = f"{topic}-in"
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        plain.produce(source, value=f"in-{i}".encode())
    if plain.flush(60) != 0:
        fail("input not delivered")
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": "ctp",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if os.environ.get("GROUP_PROTOCOL") == "consumer":
        settings["group.protocol"] = "consumer"  # the member epoch is checked
    consumer = Consumer(settings)
    consumer.subscribe([source])
    producer = transactional(bootstrap, "tx-ctp")
    done, batches, aborted_once = 0, 0, False
    deadline = time.time() + 90
    while done < 60 and time.time() < deadline:
        messages = [m for m in consumer.consume(10, 1.0) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            value = f"t-{m.value().decode()}"
            producer.produce(topic, value=value.encode(), partition=m.offset() % partitions)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        batches += 1
        if batches == 2 and not aborted_once:
            aborted_once = True
            producer.abort_transaction(60)
            # Read the aborted batch's input again, from the committed offsets.
            committed = committed_when_stable(consumer, consumer.assignment())
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        producer.commit_transaction(60)
        done += len(messages)
    if done != 60:
        fail(f"consume-transform-produce processed {done} of 60")
    committed = committed_when_stable(consumer, [TopicPartition(source, 0)])[0].offset
    consumer.close()
    if committed != 60:
        fail(f"group ctp committed offset {committed}, expected 60")
    return {f"t-in-{i}" for i in range(60)}


def read_all(bootstrap, topic, partitions, isolation):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    by_partition = {p: [] for p in range(partitions)}
    at_end = set()
    deadline = time.time() + 60
    while len(at_end) < partitions and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == -191:  # _PARTITION_EOF
                at_end.add(message.partition())
                continue
            fail("consumer error:", message.error())
        at_end.discard(message.partition())
        by_partition[message.partition()].append(message.value().decode())
    if len(at_end) < partitions:
        fail(isolation, "consumer did not reach every partition's end:", at_end)
    ends = {}
    for p in range(partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        position = consumer.position([TopicPartition(topic, p)])[0].offset
        ends[p] = (position, high)
    consumer.close()
    return by_partition, ends


def in_send_order(values):
    """Each producer's values in one partition come in the order sent."""
    last = {}
    for value in values:
        prefix, number = value.rsplit("-", 1)
        if last.get(prefix, -1) >= int(number):
            return False
        last[prefix] = int(number)
    return True


def main():
    bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    committed, aborted = committed_and_aborted(bootstrap, topic, partitions)
    znew, zold = zombie_fenced(bootstrap, topic, partitions)
    committed |= znew
    aborted |= zold
    committed |= consume_transform_produce(bootstrap, topic, partitions)

    by_partition, ends = read_all(bootstrap, topic, partitions, "read_committed")
    seen = [v for values in by_partition.values() for v in values]
    if sorted(seen) != sorted(committed):
        missing = committed - set(seen)
        extra = [v for v in seen if v not in committed]
        fail(f"read_committed: {len(missing)} missing {sorted(missing)[:5]}, extra {extra[:5]}")
    if len(seen) != len(set(seen)):
        fail("read_committed: duplicates")
    if not all(in_send_order(v) for v in by_partition.values()):
        fail("read_committed: out of order")
    # The consumer's position passes the markers: at the end, the LSO is
    # the high watermark.
    stuck = {p: e for p, e in ends.items() if e[0] != e[1]}
    if stuck:
        fail("last stable offset below the high watermark (position, hw):", stuck)

    by_partition, _ = read_all(bootstrap, topic, partitions, "read_uncommitted")
    everything = {v for values in by_partition.values() for v in values}
    if not (committed | aborted) <= everything:
        fail("read_uncommitted misses values:", sorted((committed | aborted) - everything)[:5])
    print(
        f"read_committed saw {len(seen)} committed values of {len(committed)}, "
        f"none of {len(aborted)} aborted; read_uncommitted saw {len(everything)}; "
        f"every LSO at its high watermark"
    )


if __name__ == "__main__":
    main()
