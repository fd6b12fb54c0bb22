// KafkaJS (npm) with SASL/SCRAM-SHA-256 and SCRAM-SHA-512 against the real
// binary: a user made over REST produces and consumes; a wrong password is
// refused.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');
const { Node } = require('../pulsar_client/node.js');

const WAIT_MS = 30000;

function client(node, mechanism, password) {
  return new Kafka({ clientId: 'kafkajs-scram', brokers: [`127.0.0.1:${node.ports.kafka}`],
    logLevel: logLevel.NOTHING, retry: { retries: 0 },
    sasl: { mechanism, username: 'js-user', password } });
}

test('KafkaJS SCRAM', async (t) => {
  const node = await new Node().start();
  t.after(async () => {
    assert.equal(await node.stop(), 0);
    await node.close();
  });
  const res = await fetch(`http://127.0.0.1:${node.ports.http}/admin/v2/scram-users/js-user`, {
    method: 'PUT', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ password: 'js-pw' }) });
  assert.equal(res.status, 204);

  await t.test('produces with scram-sha-256 and consumes with scram-sha-512', async () => {
    const producer = client(node, 'scram-sha-256', 'js-pw').producer();
    await producer.connect();
    await producer.send({ topic: 'js-scram', messages: [{ value: 'one' }, { value: 'two' }] });
    await producer.disconnect();
    const consumer = client(node, 'scram-sha-512', 'js-pw').consumer({ groupId: 'js-scram-group' });
    await consumer.connect();
    await consumer.subscribe({ topic: 'js-scram', fromBeginning: true });
    const got = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${got.length} messages`)), WAIT_MS);
      consumer.run({ eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length === 2) { clearTimeout(timer); resolve(); }
      } });
    });
    await consumer.disconnect();
    assert.deepEqual(got, ['one', 'two']);
  });

  await t.test('a wrong password is refused', async () => {
    const producer = client(node, 'scram-sha-256', 'not-it').producer();
    await assert.rejects(producer.connect(), (e) => /SASL SCRAM SHA256 authentication failed/.test(e.message));
  });
});
