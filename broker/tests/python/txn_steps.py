"""confluent-kafka's transactional producer, one step at a time, for
broker/tests/transaction_points.rs: the test sends a command, waits for its
answer, and so decides exactly where in a transaction it kills a broker,
the coordinator, or this process.

usage: txn_steps.py BOOTSTRAP TRANSACTIONAL_ID TRANSACTION_TIMEOUT_MS

Reads commands from stdin, one per line:

    init                          init_transactions (retried unless fatal, 60 s)
    begin                         begin_transaction
    send TOPIC PARTITION VALUE... produce each value to the partition, flush,
                                  and check every delivery succeeded
    commit                        commit_transaction
    abort                         abort_transaction
    quit

and answers each with one line: `ok CMD`, or
`error CMD NAME fatal=0|1 abortable=0|1 retriable=0|1` (NAME: the
KafkaError's name()).

usage: txn_steps.py read BOOTSTRAP TOPIC PARTITIONS ISOLATION

Reads every partition from offset 0 to its end at ISOLATION
(read_committed or read_uncommitted) and prints one JSON line,
{"0": [[offset, value], ...], "1": ...}. Fails (exit 1) unless, within
60 s, the reader's position reaches every partition's high watermark: for
read_committed, unless every last stable offset reaches its high
watermark."""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def fail(*why):
    print("FAIL:", *why, file=sys.stderr)
    sys.exit(1)


def init(producer):
    deadline = time.time() + 60
    while True:
        try:
            producer.init_transactions(30)
            return
        except KafkaException as e:
            # As transactions_faults.py: the cluster may still be electing.
            if time.time() > deadline or e.args[0].fatal():
                raise
            time.sleep(0.2)


def send(producer, topic, partition, values):
    failed = []

    def delivered(error, _message):
        if error is not None:
            failed.append(error)

    for value in values:
        producer.produce(topic, value=value.encode(), partition=partition, on_delivery=delivered)
    left = producer.flush(30)
    if failed:
        raise KafkaException(failed[0])
    if left:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{left} not delivered", retriable=True))


def run(producer, words):
    command = words[0]
    if command == "init":
        init(producer)
    elif command == "begin":
        producer.begin_transaction()
    elif command == "send":
        send(producer, words[1], int(words[2]), words[3:])
    elif command == "commit":
        producer.commit_transaction(60)
    elif command == "abort":
        producer.abort_transaction(60)
    elif command != "quit":
        raise ValueError(f"unknown command {command}")


def steps(bootstrap, transactional_id, timeout_ms):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
        }
    )
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            run(producer, words)
            answer = f"ok {words[0]}"
        except KafkaException as e:
            error = e.args[0]
            answer = (
                f"error {words[0]} {error.name()} fatal={int(error.fatal())} "
                f"abortable={int(error.txn_requires_abort())} retriable={int(error.retriable())}"
            )
        except Exception as e:  # BufferError, a bad command: still one line
            answer = f"error {words[0]} {type(e).__name__} fatal=0 abortable=0 retriable=0"
        print(answer, flush=True)
        if words[0] == "quit":
            return


def consumer(bootstrap, isolation):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-steps-reader",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )


def behind(reader, probe, topic, partitions):
    """The partitions whose reader position is short of the high watermark,
    as (partition, position, high watermark). The watermark comes from a
    read_uncommitted probe: a read_committed consumer's own is the LSO."""
    short = []
    for p in range(partitions):
        try:
            _, high = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        except KafkaException as e:  # no leader known yet: ask again later
            short.append((p, None, str(e)))
            continue
        position = reader.position([TopicPartition(topic, p)])[0].offset
        position = max(position, 0)  # nothing consumed yet: offset 0
        if position != high:
            short.append((p, position, high))
    return short


def read(bootstrap, topic, partitions, isolation):
    reader, probe = consumer(bootstrap, isolation), consumer(bootstrap, "read_uncommitted")
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = {str(p): [] for p in range(partitions)}
    at_end = set()
    deadline = time.time() + 60
    while True:
        if time.time() > deadline:
            short = behind(reader, probe, topic, partitions)
            fail(f"{isolation}: after 60 s, (partition, position, high watermark) {short}")
        message = reader.poll(0.5)
        if message is None:
            if len(at_end) == partitions and not behind(reader, probe, topic, partitions):
                break
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            elif message.error().fatal():
                fail("consumer error:", message.error())
            else:  # a transient one (a connection lost): the deadline bounds it
                print("consumer error:", message.error(), file=sys.stderr)
            continue
        at_end.discard(message.partition())
        value = (message.value() or b"").decode()
        records[str(message.partition())].append([message.offset(), value])
    reader.close()
    probe.close()
    print(json.dumps(records), flush=True)


def main():
    if sys.argv[1] == "read":
        bootstrap, topic, partitions, isolation = sys.argv[2:6]
        read(bootstrap, topic, int(partitions), isolation)
    else:
        steps(sys.argv[1], sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
