// The pulsar-flex client (npm) on Key_Shared subscriptions and negative
// acknowledgements: what its dead-letter logic sees as redeliveryCount.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { Consumer } = require('pulsar-flex');
const { Node, waitFor } = require('./node');
const { flexProducer, flexConsumer } = require('./flex');

// pulsar-flex keeps reconnect timers alive; end the process once every test
// is done, keeping the exit code the runner set.
test.after(() => setImmediate(() => process.exit()));

const producer = flexProducer;

function consumer(node, topic, subscription, subType, name) {
  return flexConsumer(node, topic, subscription, subType,
    { consumerName: name, initialPosition: Consumer.INITIAL_POSITION.EARLIEST });
}

test('Key_Shared consumers attach, and messages without a key stay in order on one of them', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/ks-flex';
    const a = consumer(node, topic, 'ks', Consumer.SUB_TYPES.KEY_SHARED, 'a');
    const b = consumer(node, topic, 'ks', Consumer.SUB_TYPES.KEY_SHARED, 'b');
    await a.subscribe();
    await b.subscribe();
    const got = { a: [], b: [] };
    for (const [name, c] of [['a', a], ['b', b]]) {
      c.run({
        onMessage: async ({ ack, message }) => {
          got[name].push(message.toString());
          await ack();
        },
        autoAck: false,
      });
    }
    const p = producer(node, topic);
    await p.create();
    for (let i = 0; i < 20; i++) await p.sendMessage({ payload: `m-${i}` });
    await waitFor(() => got.a.length + got.b.length >= 20, 20000, '20 messages');
    const expected = [...Array(20).keys()].map((i) => `m-${i}`);
    // No key hashes to one fixed slot: a single consumer takes them all, in order.
    assert.ok(got.a.length === 0 || got.b.length === 0, JSON.stringify(got));
    assert.deepStrictEqual(got.a.concat(got.b), expected);
    await a.unsubscribe();
    await b.unsubscribe();
    await p.close();
  } finally {
    await node.close();
  }
});

test('a negative acknowledgement comes back with redeliveryCount one higher each time', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/nack-flex';
    const c = consumer(node, topic, 'work', Consumer.SUB_TYPES.SHARED, 'worker');
    await c.subscribe();
    const seen = [];
    c.run({
      onMessage: async ({ ack, message, redeliveryCount }) => {
        seen.push({ payload: message.toString(), redeliveryCount });
        // Gives up on 'poison' twice, as a client whose handler fails would.
        if (message.toString() === 'poison' && redeliveryCount < 2) {
          await ack({ type: Consumer.ACK_TYPES.NEGATIVE });
        } else {
          await ack();
        }
      },
      autoAck: false,
    });
    const p = producer(node, topic);
    await p.create();
    await p.sendMessage({ payload: 'poison' });
    await p.sendMessage({ payload: 'fine' });
    await waitFor(() => seen.filter((m) => m.payload === 'poison').length >= 3, 20000, 'three deliveries of poison');
    assert.deepStrictEqual(seen.filter((m) => m.payload === 'poison').map((m) => m.redeliveryCount), [0, 1, 2]);
    assert.deepStrictEqual(seen.filter((m) => m.payload === 'fine').map((m) => m.redeliveryCount), [0]);
    await c.unsubscribe();
    await p.close();
  } finally {
    await node.close();
  }
});
