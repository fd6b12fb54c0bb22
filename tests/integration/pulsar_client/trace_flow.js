// For tests/integration/test_tracing.py: pulsar-flex produces the messages
// given, then a Shared consumer negatively acknowledges the ones marked
// once and acknowledges everything else. Prints one JSON line with what it
// received, then exits 0 (1 with the reason on stderr).
//
//   node trace_flow.js <host:port> <topic> <subscription> '<messages json>'
//   messages: [{"payload": "...", "properties": {...}, "nack": true}, ...]
'use strict';
const { Consumer } = require('pulsar-flex');
const { flexProducer, flexConsumer } = require('./flex');

async function main() {
  const [server, topic, subscription, messagesJson] = process.argv.slice(2);
  const messages = JSON.parse(messagesJson);
  const node = { pulsarServers: [server] };
  const consumer = flexConsumer(node, topic, subscription, Consumer.SUB_TYPES.SHARED,
    { consumerName: 'flex-worker', initialPosition: Consumer.INITIAL_POSITION.EARLIEST });
  await consumer.subscribe();
  const seen = [];
  const nacked = new Set();
  consumer.run({
    onMessage: async ({ ack, message, redeliveryCount }) => {
      const payload = message.toString();
      seen.push({ payload, redeliveryCount });
      const wanted = messages.find((m) => m.payload === payload);
      if (wanted && wanted.nack && !nacked.has(payload)) {
        nacked.add(payload);
        await ack({ type: Consumer.ACK_TYPES.NEGATIVE });
      } else {
        await ack();
      }
    },
    autoAck: false,
  });
  const producer = flexProducer(node, topic);
  await producer.create();
  for (const m of messages) await producer.sendMessage({ payload: m.payload, properties: m.properties || {} });
  const expected = messages.length + messages.filter((m) => m.nack).length;
  const deadline = Date.now() + 30000;
  while (seen.length < expected) {
    if (Date.now() > deadline) throw new Error(`received ${JSON.stringify(seen)}, expected ${expected} deliveries`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 200));  // the last ack reaches the broker
  await producer.close();
  process.stdout.write(JSON.stringify(seen) + '\n');
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
