// @platformatic/kafka (pure JavaScript) against the broker, as its users
// write it: the admin client creates and lists a topic, a producer with
// its DEFAULT settings sends keyed values, a consumer in a group reads
// them all and commits the last message of each partition.
//
// usage: node platformatic_client.mjs BOOTSTRAP TOPIC GROUP COUNT
// (NODE_PATH names the node_modules holding @platformatic/kafka)
//
// Prints "listed TOPIC", "acked COUNT", "record PARTITION OFFSET KEY VALUE"
// per message read and "committed"; broker/tests/clients.rs checks them.
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(path.join(process.env.NODE_PATH, 'noop.js'))
const { Admin, Producer, Consumer, stringSerializers, stringDeserializers } =
  require('@platformatic/kafka')

const [bootstrap, topic, group, countText] = process.argv.slice(2)
const count = Number(countText)
const bootstrapBrokers = [bootstrap]

const admin = new Admin({ clientId: 'compat-admin', bootstrapBrokers })
await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1 })
if ((await admin.listTopics()).includes(topic)) console.log('listed', topic)
await admin.close()

const producer = new Producer({
  clientId: 'compat-producer',
  bootstrapBrokers,
  serializers: stringSerializers
})
const messages = []
for (let i = 0; i < count; i++) {
  messages.push({ topic, key: `key-${i % 7}`, value: `value-${i}` })
}
// One send per message, each awaited in turn: acknowledged one by one.
for (const message of messages) await producer.send({ messages: [message] })
console.log('acked', messages.length)
await producer.close()

const consumer = new Consumer({
  groupId: group,
  clientId: 'compat-consumer',
  bootstrapBrokers,
  deserializers: stringDeserializers
})
const stream = await consumer.consume({
  topics: [topic],
  autocommit: false,
  mode: 'committed',
  fallbackMode: 'earliest'
})
const last = new Map()
let seen = 0
const deadline = setTimeout(() => {
  console.error(`only ${seen} of ${count} messages`)
  process.exit(1)
}, 60_000)
for await (const message of stream) {
  seen++
  console.log('record', message.partition, String(message.offset), message.key, message.value)
  last.set(message.partition, message)
  if (seen >= count) break
}
clearTimeout(deadline)
for (const message of last.values()) await message.commit()
console.log('committed')
await consumer.close(true)
