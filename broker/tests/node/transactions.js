// kafkajs's transactional producer: commits 20 values "js-c-N" and aborts
// 10 "js-a-N" (sent first, so they reach the log), to partition 0 of TOPIC.
//
// usage: node transactions.js BOOTSTRAP TOPIC
// Prints "kafkajs committed 20, aborted 10"; exits non-zero on failure.
const { Kafka, logLevel } = require('kafkajs');

async function inTransaction(producer, topic, prefix, count, commit) {
  const transaction = await producer.transaction();
  const messages = [];
  for (let i = 0; i < count; i++) {
    messages.push({ value: `${prefix}-${i}`, partition: 0 });
  }
  await transaction.send({ topic, messages });
  if (commit) {
    await transaction.commit();
  } else {
    await transaction.abort();
  }
}

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'transactions-test', brokers: [bootstrap], logLevel: logLevel.WARN });
  const producer = kafka.producer({
    transactionalId: 'js-tx',
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  await inTransaction(producer, topic, 'js-c', 20, true);
  await inTransaction(producer, topic, 'js-a', 10, false);
  await producer.disconnect();
  console.log('kafkajs committed 20, aborted 10');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
