"""Transactions while brokers are killed: confluent-kafka's transactional
producer runs transactions of 9 values over every partition of TOPIC for
SECONDS (every fourth aborted on purpose), handling errors as librdkafka
documents (retriable: retry the call; abortable: abort; fatal: a new
producer instance, which fences the old). Meanwhile the test kills and
restarts brokers (the coordinator among them). Then, with every broker
back, a read_committed consumer reads every partition to its end:

- a committed transaction's values are all there, each once;
- an aborted one's are absent;
- one whose outcome the client could not learn is all there or absent
  (never torn);
- every partition's last stable offset reaches its high watermark.

usage: transactions_faults.py BOOTSTRAP TOPIC PARTITIONS SECONDS

Prints a summary line; exits non-zero on any failure."""

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

VALUES = 9


def fail(*why):
    print("FAIL:", *why, file=sys.stderr)
    sys.exit(1)


def new_producer(bootstrap):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "tx-faults",
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000,
        }
    )
    deadline = time.time() + 120
    while True:
        try:
            producer.init_transactions(30)
            return producer
        except KafkaException as e:
            if time.time() > deadline or e.args[0].fatal():
                raise
            time.sleep(0.2)


def finish(producer, commit):
    """Commits or aborts; 'committed', 'aborted' or 'unknown'."""
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if commit:
                producer.commit_transaction(30)
                return "committed"
            producer.abort_transaction(30)
            return "aborted"
        except KafkaException as e:
            error = e.args[0]
            if error.fatal():
                return "unknown"
            if error.txn_requires_abort():
                commit = False
                continue
            if error.retriable():
                time.sleep(0.1)
                continue
            return "unknown"
    return "unknown"


def produce_for(bootstrap, topic, partitions, seconds):
    outcomes = {}
    producer = new_producer(bootstrap)
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        try:
            producer.begin_transaction()
            for k in range(VALUES):
                producer.produce(topic, value=f"T{n}-{k}".encode(), partition=k % partitions)
            outcome = finish(producer, n % 4 != 3)
        except (KafkaException, BufferError):
            outcome = "unknown"
        outcomes[n] = outcome
        n += 1
        if outcome == "unknown":
            producer = new_producer(bootstrap)
    return outcomes


def read_committed(bootstrap, topic, partitions):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "faults-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, at_end = [], set()
    deadline = time.time() + 120
    while time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            if len(at_end) == partitions and lso_at_hw(consumer, topic, partitions):
                break
            continue
        if message.error():
            if message.error().code() == -191:  # _PARTITION_EOF
                at_end.add(message.partition())
                continue
            fail("consumer error:", message.error())
        at_end.discard(message.partition())
        seen.append(message.value().decode())
    if not lso_at_hw(consumer, topic, partitions):
        fail("a partition's last stable offset stayed below its high watermark")
    consumer.close()
    return seen


def lso_at_hw(consumer, topic, partitions):
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        position = consumer.position([TopicPartition(topic, p)])[0].offset
        if position != high:
            return False
    return True


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    partitions, seconds = int(sys.argv[3]), float(sys.argv[4])
    outcomes = produce_for(bootstrap, topic, partitions, seconds)
    time.sleep(5)  # the test restarts every broker meanwhile
    seen = read_committed(bootstrap, topic, partitions)
    if len(seen) != len(set(seen)):
        fail("duplicates:", len(seen) - len(set(seen)))
    by_txn = {}
    for value in seen:
        n, _ = value[1:].split("-")
        by_txn.setdefault(int(n), set()).add(value)
    counts = {"committed": 0, "aborted": 0, "unknown": 0}
    for n, outcome in outcomes.items():
        counts[outcome] += 1
        present = len(by_txn.get(n, ()))
        if outcome == "committed" and present != VALUES:
            fail(f"committed transaction {n} has {present} of {VALUES} values")
        if outcome == "aborted" and present != 0:
            fail(f"aborted transaction {n} shows {present} values")
        if outcome == "unknown" and present not in (0, VALUES):
            fail(f"transaction {n} is torn: {present} of {VALUES} values")
    if counts["committed"] == 0:
        fail("nothing committed")
    print(
        f"{len(outcomes)} transactions: {counts['committed']} committed (all read once), "
        f"{counts['aborted']} aborted (none read), {counts['unknown']} unknown (none torn); "
        f"every LSO at its high watermark"
    )


if __name__ == "__main__":
    main()
