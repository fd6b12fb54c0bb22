// Our client (`magnetar produce` / `magnetar consume`) and pulsar-flex read
// each other's batches through magnetar.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { execFile } = require('node:child_process');
const { Producer, Consumer } = require('pulsar-flex');
const { Node, waitFor, BIN } = require('./node');
const { quiet } = require('./flex');

test.after(() => setImmediate(() => process.exit()));


function magnetar(args) {
  return new Promise((resolve, reject) => {
    execFile(BIN, args, { timeout: 60000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`magnetar ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

test('magnetar consume splits a batch pulsar-flex sent', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/flex-batch';
    const p = new Producer({ topic, discoveryServers: node.pulsarServers, producerAccessMode: Producer.ACCESS_MODES.SHARED, ...quiet });
    await p.create();
    await p.sendBatch({ messages: [{ payload: 'one', properties: { k: 'a' } }, { payload: 'two' }, { payload: 'three' }] });
    await p.close();
    const url = `pulsar://${node.pulsarServers[0]}`;
    const out = await magnetar(['consume', topic, '-s', 'ours', '-P', 'Earliest', '-n', '3', '--json', '--url', url]);
    const got = out.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepStrictEqual(got.map((m) => m.payload), ['one', 'two', 'three']);
    assert.deepStrictEqual(got[0].properties, { k: 'a' });
    // One entry: the ids differ only in their batch index.
    assert.deepStrictEqual(got.map((m) => m.messageId.split(':')[2]), ['0', '1', '2']);
    assert.strictEqual(new Set(got.map((m) => m.messageId.split(':').slice(0, 2).join(':'))).size, 1);
  } finally {
    await node.close();
  }
});

test('pulsar-flex receives the batches magnetar produce --batch sends', async () => {
  const node = await new Node().start();
  try {
    const topic = 'persistent://public/default/our-batch';
    const c = new Consumer({ topic, discoveryServers: node.pulsarServers, subscription: 'flex',
      subType: Consumer.SUB_TYPES.EXCLUSIVE, consumerName: 'flex', receiveQueueSize: 100, ...quiet });
    await c.subscribe();
    const got = [];
    c.run({ onMessage: async ({ ack, message, properties }) => { got.push({ payload: message.toString(), properties }); await ack(); },
      autoAck: false });
    const url = `pulsar://${node.pulsarServers[0]}`;
    const out = JSON.parse(await magnetar(['produce', topic, '--batch', '-m', 'x', '-m', 'y', '-m', 'z',
      '-p', 'from=ours', '--json', '--url', url]));
    assert.strictEqual(out.produced, 3);
    await waitFor(() => got.length >= 3, 20000, '3 messages');
    assert.deepStrictEqual(got.map((m) => m.payload), ['x', 'y', 'z']);
    assert.deepStrictEqual(got[2].properties, { from: 'ours' });
    await c.unsubscribe();
  } finally {
    await node.close();
  }
});
