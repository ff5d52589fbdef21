// @confluentinc/kafka-javascript (librdkafka under Node.js, its KafkaJS-
// style API) against the broker, as its users write it: the admin client
// creates and lists a topic, a producer with its DEFAULT settings sends
// keyed values, a consumer in a group reads them all and commits the
// offset after the last message of each partition.
//
// usage: node confluent_js_client.js BOOTSTRAP TOPIC GROUP COUNT
// (NODE_PATH names the node_modules holding the package)
//
// Prints "listed TOPIC", "acked COUNT", "record PARTITION OFFSET KEY VALUE"
// per message read and "committed"; broker/tests/clients.rs checks them.
const { Kafka } = require('@confluentinc/kafka-javascript').KafkaJS

const [bootstrap, topic, group, countText] = process.argv.slice(2)
const count = Number(countText)
const kafka = new Kafka({ kafkaJS: { brokers: [bootstrap], logLevel: 1 } })

async function admin () {
  const client = kafka.admin()
  await client.connect()
  await client.createTopics({ topics: [{ topic, numPartitions: 3 }] })
  if ((await client.listTopics()).includes(topic)) console.log('listed', topic)
  await client.disconnect()
}

async function produce () {
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) {
    messages.push({ key: `key-${i % 7}`, value: `value-${i}` })
  }
  await producer.send({ topic, messages })
  console.log('acked', messages.length)
  await producer.disconnect()
}

async function consume () {
  const consumer = kafka.consumer({
    kafkaJS: { groupId: group, fromBeginning: true, autoCommit: false }
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic] })
  const next = new Map()
  let seen = 0
  await new Promise((resolve, reject) => {
    const deadline = setTimeout(
      () => reject(new Error(`only ${seen} of ${count} messages`)), 60_000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen++
        console.log('record', partition, message.offset,
          message.key.toString(), message.value.toString())
        next.set(partition, (BigInt(message.offset) + 1n).toString())
        if (seen >= count) {
          clearTimeout(deadline)
          resolve()
        }
      }
    }).catch(reject)
  })
  const offsets = [...next].map(([partition, offset]) => ({ topic, partition, offset }))
  await consumer.commitOffsets(offsets)
  console.log('committed')
  await consumer.disconnect()
}

async function main () {
  await admin()
  await produce()
  await consume()
}

main().catch(error => {
  console.error(error)
  process.exit(1)
})
