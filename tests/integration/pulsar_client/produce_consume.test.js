// The pulsar-flex client (npm) producing and consuming through magnetar.
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
  return flexConsumer(node, topic, subscription, subType, name ? { consumerName: name } : {});
}

// Collects messages as they arrive; acknowledges each one.
function collect(c) {
  const got = [];
  c.run({
    onMessage: async ({ ack, message, properties, redeliveryCount }) => {
      got.push({ payload: message.toString(), properties, redeliveryCount });
      await ack();
    },
    autoAck: false,
  });
  return got;
}

test('messages and batches arrive in order with their properties', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/orders';
    const c = consumer(node, topic, 'audit', Consumer.SUB_TYPES.EXCLUSIVE);
    await c.subscribe();
    const got = collect(c);
    const p = producer(node, topic);
    await p.create();
    for (let i = 0; i < 10; i++) await p.sendMessage({ payload: `order-${i}`, properties: { n: String(i) } });
    await p.sendBatch({ messages: [{ payload: 'batch-a', properties: { k: 'a' } }, { payload: 'batch-b' }] });
    await waitFor(() => got.length >= 12, 20000, '12 messages');
    assert.deepStrictEqual(got.map((m) => m.payload),
      [...Array(10).keys()].map((i) => `order-${i}`).concat(['batch-a', 'batch-b']));
    assert.deepStrictEqual(got[3].properties, { n: '3' });
    assert.deepStrictEqual(got[10].properties, { k: 'a' });
    assert.ok(got.every((m) => !m.redeliveryCount));
    await c.unsubscribe();
    await p.close();
  } finally {
    await node.close();
  }
});

test('a shared subscription splits the messages between its consumers', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/jobs';
    const a = consumer(node, topic, 'workers', Consumer.SUB_TYPES.SHARED, 'worker-a');
    const b = consumer(node, topic, 'workers', Consumer.SUB_TYPES.SHARED, 'worker-b');
    await a.subscribe();
    await b.subscribe();
    const gotA = collect(a);
    const gotB = collect(b);
    const p = producer(node, topic);
    await p.create();
    const sent = [];
    for (let i = 0; i < 40; i++) {
      sent.push(`job-${i}`);
      await p.sendMessage({ payload: `job-${i}` });
    }
    await waitFor(() => gotA.length + gotB.length >= 40, 20000, '40 jobs');
    const all = gotA.concat(gotB).map((m) => m.payload).sort();
    assert.deepStrictEqual(all, sent.slice().sort());  // each exactly once
    assert.ok(gotA.length > 0 && gotB.length > 0, `both consumers got work (${gotA.length}/${gotB.length})`);
    await a.unsubscribe().catch(() => {});
    await b.unsubscribe().catch(() => {});
    await p.close();
  } finally {
    await node.close();
  }
});

test('a subscription keeps its backlog across a restart', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/ledger';
    const first = consumer(node, topic, 'billing', Consumer.SUB_TYPES.EXCLUSIVE);
    await first.subscribe();  // creates the subscription at the end of the topic
    const p = producer(node, topic);
    await p.create();
    for (let i = 0; i < 5; i++) await p.sendMessage({ payload: `invoice-${i}` });
    await p.close();
    await first.unsubscribe();  // pulsar-flex's unsubscribe closes the consumer; the subscription stays
    assert.strictEqual(await node.stop(), 0);

    await node.start();
    const again = consumer(node, topic, 'billing', Consumer.SUB_TYPES.EXCLUSIVE);
    await again.subscribe();
    const got = collect(again);
    await waitFor(() => got.length >= 5, 20000, 'the backlog after restart');
    assert.deepStrictEqual(got.map((m) => m.payload), [0, 1, 2, 3, 4].map((i) => `invoice-${i}`));
    await again.unsubscribe();
  } finally {
    await node.close();
  }
});

test('magnetar produce/consume and pulsar-flex read each other', async () => {
  const { execFileSync, spawn } = require('node:child_process');
  const { BIN } = require('./node');
  const node = await new Node().start();
  try {
    const url = `pulsar://127.0.0.1:${node.ports.pulsar}`;
    const topic = 'persistent://public/default/interop';
    // pulsar-flex consumes what our CLI produces.
    const c = consumer(node, topic, 'flex', Consumer.SUB_TYPES.EXCLUSIVE);
    await c.subscribe();
    const got = collect(c);
    execFileSync(BIN, ['produce', topic, '-m', 'from-cli-1', '-m', 'from-cli-2', '-p', 'origin=cli', '--url', url]);
    await waitFor(() => got.length >= 2, 20000, 'the CLI messages');
    assert.deepStrictEqual(got.map((m) => m.payload), ['from-cli-1', 'from-cli-2']);
    assert.deepStrictEqual(got[0].properties, { origin: 'cli' });
    await c.unsubscribe();

    // Our CLI consumes what pulsar-flex produces; its subscription starts at
    // the earliest message, so it does not matter which of the two is first.
    const topic2 = 'persistent://public/default/interop-2';
    const cli = spawn(BIN, ['consume', topic2, '-s', 'cli', '-P', 'Earliest', '-n', '3', '--timeout', '20', '--json',
      '--url', url]);
    let out = '';
    cli.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((resolve) => cli.on('exit', resolve));
    const p = producer(node, topic2);
    await p.create();
    await p.sendMessage({ payload: 'from-flex-1', properties: { origin: 'flex' } });
    await p.sendBatch({ messages: [{ payload: 'from-flex-2' }, { payload: 'from-flex-3' }] });
    assert.strictEqual(await exited, 0);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepStrictEqual(lines.map((m) => m.payload), ['from-flex-1', 'from-flex-2', 'from-flex-3']);
    assert.deepStrictEqual(lines[0].properties, { origin: 'flex' });
    await p.close();
  } finally {
    await node.close();
  }
});
