// Reads one topic from its beginning with KafkaJS (a new group each run)
// and prints one JSON line: [[offset, key, value or null], ...]. Stops once
// `expected` records arrived, or after `idle` ms with none, within 30 s.
//   node read_topic.js <bootstrap> <topic> <expected> [idle ms]
'use strict';
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic, expectedArg, idleArg] = process.argv.slice(2);
  const expected = Number(expectedArg);
  const idle = Number(idleArg || 3000);
  const kafka = new Kafka({ clientId: 'read-topic', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `read-topic-${process.pid}-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  let last = Date.now();
  await consumer.run({
    eachMessage: async ({ message }) => {
      got.push([Number(message.offset), message.key === null ? null : message.key.toString(),
        message.value === null ? null : message.value.toString()]);
      last = Date.now();
    },
  });
  const deadline = Date.now() + 30000;
  while (got.length < expected && Date.now() < deadline && Date.now() - last < idle) {
    await new Promise((r) => setTimeout(r, 100));
  }
  await consumer.disconnect();
  process.stdout.write(JSON.stringify(got) + '\n');
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
