// amqplib (npm), the AMQP 0-9-1 client most Node.js services use, against
// the real binary: publish and consume through each exchange type,
// prefetch with manual acks, nack with requeue, confirms, mandatory
// returns, and a channel error that leaves the connection serving.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const amqplib = require('amqplib');
const { Node, waitFor } = require('../pulsar_client/node');

let node;
let conn;

test.before(async () => {
  node = await new Node().start();
  conn = await amqplib.connect(`amqp://guest:guest@127.0.0.1:${node.ports.amqp}/`);
});

test.after(async () => {
  await conn.close();
  assert.strictEqual(await node.stop(), 0);
  await node.close();
  // As in ../pulsar_client: end once every test is done, keeping the exit
  // code the runner set, rather than wait for timers left behind.
  setImmediate(() => process.exit());
});

// Consumes `count` messages from `queue` (acknowledging each), then cancels.
async function take(ch, queue, count) {
  const got = [];
  const { consumerTag } = await ch.consume(queue, (msg) => {
    got.push(msg);
    ch.ack(msg);
  });
  await waitFor(() => got.length >= count, 10000, `${count} messages from ${queue}`);
  await ch.cancel(consumerTag);
  return got;
}

test('publish and consume with properties and headers', async () => {
  const ch = await conn.createChannel();
  await ch.assertQueue('node-props');
  ch.sendToQueue('node-props', Buffer.from('hello'), {
    contentType: 'text/plain', correlationId: 'c-9', headers: { retries: 2, source: 'node' }, persistent: true,
  });
  const [msg] = await take(ch, 'node-props', 1);
  assert.strictEqual(msg.content.toString(), 'hello');
  assert.strictEqual(msg.properties.contentType, 'text/plain');
  assert.strictEqual(msg.properties.correlationId, 'c-9');
  assert.strictEqual(msg.properties.deliveryMode, 2);
  assert.deepStrictEqual(msg.properties.headers, { retries: 2, source: 'node' });
  await ch.close();
});

test('direct, fanout, topic and headers exchanges route', async () => {
  const ch = await conn.createChannel();
  const queues = {};
  for (const [type, key, args] of [['direct', 'red'], ['fanout', ''], ['topic', 'log.*.error'],
    ['headers', '', { 'x-match': 'all', team: 'pay' }]]) {
    const ex = `node-${type}`;
    await ch.assertExchange(ex, type);
    const { queue } = await ch.assertQueue('', { exclusive: true });
    await ch.bindQueue(queue, ex, key, args);
    queues[type] = queue;
  }
  ch.publish('node-direct', 'red', Buffer.from('d'));
  ch.publish('node-direct', 'blue', Buffer.from('lost'));
  ch.publish('node-fanout', 'anything', Buffer.from('f'));
  ch.publish('node-topic', 'log.db.error', Buffer.from('t'));
  ch.publish('node-topic', 'log.db.info', Buffer.from('lost'));
  ch.publish('node-headers', '', Buffer.from('h'), { headers: { team: 'pay' } });
  ch.publish('node-headers', '', Buffer.from('lost'), { headers: { team: 'ops' } });
  for (const [type, body] of [['direct', 'd'], ['fanout', 'f'], ['topic', 't'], ['headers', 'h']]) {
    const got = await take(ch, queues[type], 1);
    assert.strictEqual(got[0].content.toString(), body, type);
    const { messageCount } = await ch.checkQueue(queues[type]);
    assert.strictEqual(messageCount, 0, type);
  }
  await ch.close();
});

test('prefetch holds deliveries until acks, nack requeues', async () => {
  const ch = await conn.createChannel();
  await ch.assertQueue('node-prefetch');
  for (let i = 0; i < 5; i++) ch.sendToQueue('node-prefetch', Buffer.from(`m${i}`));
  await ch.prefetch(2);
  const got = [];
  await ch.consume('node-prefetch', (msg) => got.push(msg));
  await waitFor(() => got.length >= 2, 10000, 'two deliveries');
  await new Promise((r) => setTimeout(r, 300));
  assert.strictEqual(got.length, 2);
  ch.nack(got[0], false, true);  // back to the queue
  ch.ack(got[1]);
  await waitFor(() => got.length >= 4, 10000, 'two more deliveries');
  const redelivered = got.slice(2).filter((m) => m.fields.redelivered);
  assert.strictEqual(redelivered.length, 1);
  assert.strictEqual(redelivered[0].content.toString(), 'm0');
  await ch.close();
});

test('confirm channel acks stored messages and returns unroutable mandatory ones', async () => {
  const ch = await conn.createConfirmChannel();
  await ch.assertQueue('node-confirm');
  const acks = [];
  for (let i = 0; i < 10; i++) {
    acks.push(new Promise((resolve, reject) => ch.sendToQueue('node-confirm', Buffer.from(`c${i}`), {},
      (err) => (err ? reject(err) : resolve()))));
  }
  await Promise.all(acks);
  const returned = new Promise((resolve) => ch.once('return', resolve));
  ch.publish('', 'node-nowhere', Buffer.from('back'), { mandatory: true });
  const msg = await returned;
  assert.strictEqual(msg.fields.replyCode, 312);
  assert.strictEqual(msg.content.toString(), 'back');
  const { messageCount } = await ch.checkQueue('node-confirm');
  assert.strictEqual(messageCount, 10);
  await ch.close();
});

test('a channel error closes that channel only', async () => {
  const bad = await conn.createChannel();
  const closed = new Promise((resolve) => bad.once('error', resolve));
  await assert.rejects(bad.checkQueue('node-missing'), /404/);
  assert.match(String((await closed).message), /NOT_FOUND/);
  const ch = await conn.createChannel();
  await ch.assertQueue('node-after-error');
  ch.sendToQueue('node-after-error', Buffer.from('ok'));
  const got = await take(ch, 'node-after-error', 1);
  assert.strictEqual(got[0].content.toString(), 'ok');
  await ch.close();
});
