// A kafkajs 2.2.4 group consumer for the wasmassign end-to-end tests. It
// offers kafkajs's default round-robin assigner (protocol
// "RoundRobinAssigner", eager) and prints "partition offset" for every
// message, so the test sees what it actually read.
//
// usage: node consumer.js BROKER GROUP TOPIC CLIENT_ID
const { Kafka, logLevel, PartitionAssigners } = require('kafkajs')

const [broker, groupId, topic, clientId] = process.argv.slice(2)
const kafka = new Kafka({ clientId, brokers: [broker], logLevel: logLevel.ERROR })
const consumer = kafka.consumer({
  groupId,
  partitionAssigners: [PartitionAssigners.roundRobin],
  sessionTimeout: 6000,
  heartbeatInterval: 200,
  rebalanceTimeout: 10000,
  // kafkajs heartbeats between fetches, so a member learns of a rebalance
  // only when its long poll returns; the default 5 s wait would make every
  // join take that long.
  maxWaitTimeInMs: 250,
})

async function main () {
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommitInterval: 200,
    eachMessage: async ({ partition, message }) => {
      process.stdout.write(`${partition} ${message.offset}\n`)
    },
  })
}

async function stop () {
  try {
    await consumer.disconnect()
  } finally {
    process.exit(0)
  }
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
main().catch((err) => {
  console.error(err)
  process.exit(1)
})
