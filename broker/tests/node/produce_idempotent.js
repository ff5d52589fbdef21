// kafkajs with `idempotent: true`: sends COUNT values "value-N" in order
// to one partition (acks all, as idempotence requires) and waits for every
// acknowledgement.
//
// usage: node produce_idempotent.js BOOTSTRAP TOPIC COUNT
// Prints "acked COUNT"; exits non-zero on any failure.
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic, countText] = process.argv.slice(2);
  const count = Number(countText);
  const kafka = new Kafka({ clientId: 'idempotence-test', brokers: [bootstrap], logLevel: logLevel.WARN });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  let acked = 0;
  // Several sends of 50 each, in order.
  for (let from = 0; from < count; from += 50) {
    const messages = [];
    for (let i = from; i < Math.min(from + 50, count); i++) {
      messages.push({ value: `value-${i}`, partition: 0 });
    }
    await producer.send({ topic, acks: -1, messages });
    acked += messages.length;
  }
  console.log('acked', acked);
  await producer.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
