// pulsar-flex's token authentication (its `jwt` option) against a node
// with --authentication-enabled: the right token produces and consumes, no
// token is refused.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Consumer } = require('pulsar-flex');
const { Node, waitFor, BIN } = require('./node');
const { flexProducer, flexConsumer } = require('./flex');

test.after(() => setImmediate(() => process.exit()));

test('pulsar-flex with a jwt works against token authentication; without one it is refused', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-keys-'));
  const key = path.join(dir, 'token.key');
  execFileSync(BIN, ['tokens', 'create-secret-key', '--output', key]);
  const jwt = execFileSync(BIN, ['tokens', 'create', '--secret-key', `file://${key}`, '--subject', 'app'])
    .toString().trim();
  const node = await new Node(undefined, ['--authentication-enabled', '--token-secret-key', `file://${key}`]).start();
  try {
    const topic = 'persistent://public/default/secured';
    const c = flexConsumer(node, topic, 'reader', Consumer.SUB_TYPES.EXCLUSIVE, { jwt });
    await c.subscribe();
    const got = [];
    c.run({ onMessage: async ({ ack, message }) => { got.push(message.toString()); await ack(); }, autoAck: false });
    const p = flexProducer(node, topic, { jwt });
    await p.create();
    await p.sendMessage({ payload: 'with a token' });
    await waitFor(() => got.length === 1, 20000, 'the message');
    assert.deepStrictEqual(got, ['with a token']);
    await p.close();
    await c.unsubscribe();

    const anonymous = flexProducer(node, topic, { connectionTimeout: 3000 });
    await assert.rejects(Promise.race([anonymous.create(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('no answer')), 15000))]));
  } finally {
    await node.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
