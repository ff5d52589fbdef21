"""confluent-kafka's transactional producer, as an application uses it, with
librdkafka's defaults otherwise:

1. Producer "tx-1" (transactional.id) commits 50 values, aborts 30, commits
   20 more, over every partition of TOPIC.
2. A zombie: producer "tx-z" begins a transaction and sends 10 values (they
   reach the log); a second instance with the same transactional.id
   initialises, which fences the first and aborts its open transaction.
   The first's commit must fail as fenced; the second commits 10 values.
3. A read_committed consumer (librdkafka's default) reads every partition
   from the start to its end: exactly the committed values, each once, in
   each partition's order. A read_uncommitted one also sees the aborted
   ones (the log holds them; the markers hide them).
4. Every partition's last stable offset reached its high watermark (the
   committed consumer's position reaches the end).

usage: transactions.py BOOTSTRAP TOPIC PARTITIONS

Prints a summary line; exits non-zero on any failure."""

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
