// KafkaJS (npm) against the real binary: admin create/grow/delete topics,
// a group's committed offsets listed without naming topics, an idempotent
// producer, and a consumer group of two members that
// rebalances when one leaves.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');
const { Node, waitFor } = require('../pulsar_client/node.js');

const WAIT_MS = 30000;

async function httpJson(node, method, path) {
  const res = await fetch(`http://127.0.0.1:${node.ports.http}${path}`, { method });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// A node, a KafkaJS client of it and a connected admin, all closed after `t`.
async function kafkaNode(t, clientId, args) {
  const node = await new Node(undefined, args).start();
  const kafka = new Kafka({ clientId, brokers: [`127.0.0.1:${node.ports.kafka}`],
    logLevel: logLevel.NOTHING, retry: { retries: 3 } });
  const admin = kafka.admin();
  await admin.connect();
  t.after(async () => {
    await admin.disconnect();
    assert.equal(await node.stop(), 0);
    await node.close();
  });
  return { node, kafka, admin };
}

test('KafkaJS', async (t) => {
  const { node, kafka, admin } = await kafkaNode(t, 'kafkajs-test');

  await t.test('admin creates, grows, describes and deletes topics', async () => {
    assert.equal(await admin.createTopics({ topics: [{ topic: 'js-orders', numPartitions: 3 }], waitForLeaders: true }), true);
    // Creating it again is not an error for createTopics: it answers false.
    assert.equal(await admin.createTopics({ topics: [{ topic: 'js-orders', numPartitions: 3 }] }), false);
    let md = await admin.fetchTopicMetadata({ topics: ['js-orders'] });
    assert.equal(md.topics[0].partitions.length, 3);
    assert.deepEqual((await httpJson(node, 'GET', '/admin/v2/persistent/public/default/js-orders/partitions')).body,
      { partitions: 3 });
    await admin.createPartitions({ topicPartitions: [{ topic: 'js-orders', count: 5 }] });
    md = await admin.fetchTopicMetadata({ topics: ['js-orders'] });
    assert.equal(md.topics[0].partitions.length, 5);
    const configs = await admin.describeConfigs({ resources: [{ type: 2, name: 'js-orders' }], includeSynonyms: false });
    const names = configs.resources[0].configEntries.map((e) => e.configName);
    assert.ok(names.includes('retention.ms'), names.join(','));
    assert.ok((await admin.listTopics()).includes('js-orders'));
    await admin.deleteTopics({ topics: ['js-orders'] });
    assert.ok(!(await admin.listTopics()).includes('js-orders'));
    const after = await httpJson(node, 'GET', '/admin/v2/persistent/public/default/js-orders/partitions');
    assert.deepEqual(after.body, { partitions: 0 });
  });

  await t.test('admin.fetchOffsets without topics lists every partition the group committed', async () => {
    await admin.createTopics({ topics: [{ topic: 'js-offsets-a', numPartitions: 2 }, { topic: 'js-offsets-b' }] });
    const producer = kafka.producer();
    await producer.connect();
    for (const [topic, partition] of [['js-offsets-a', 0], ['js-offsets-a', 1], ['js-offsets-b', 0]]) {
      await producer.send({ topic, messages: Array.from({ length: 5 }, (_, i) => ({ partition, value: `m${i}` })) });
    }
    await producer.disconnect();
    await admin.setOffsets({ groupId: 'js-offsets', topic: 'js-offsets-a',
      partitions: [{ partition: 0, offset: '3' }, { partition: 1, offset: '5' }] });
    await admin.setOffsets({ groupId: 'js-offsets', topic: 'js-offsets-b', partitions: [{ partition: 0, offset: '2' }] });

    const all = await admin.fetchOffsets({ groupId: 'js-offsets' });
    const flat = all.flatMap(({ topic, partitions }) => partitions.map((p) => [topic, p.partition, p.offset])).sort();
    assert.deepEqual(flat, [['js-offsets-a', 0, '3'], ['js-offsets-a', 1, '5'], ['js-offsets-b', 0, '2']]);
    // Naming the topic still answers every partition of it.
    const named = await admin.fetchOffsets({ groupId: 'js-offsets', topics: ['js-offsets-b'] });
    assert.deepEqual(named, [{ topic: 'js-offsets-b', partitions: [{ partition: 0, offset: '2', metadata: null }] }]);
    // A group that committed nothing has nothing to list.
    assert.deepEqual(await admin.fetchOffsets({ groupId: 'js-never-committed' }), []);
  });

  await t.test('an idempotent producer writes every message once, in order', async () => {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const offsets = [];
    for (let round = 0; round < 10; round++) {
      const messages = Array.from({ length: 20 }, (_, i) => ({ key: `k${i % 4}`, value: `v${round * 20 + i}` }));
      const [meta] = await producer.send({ topic: 'js-idem', acks: -1, messages });
      assert.equal(meta.errorCode, 0);
      offsets.push(Number(meta.baseOffset));
    }
    await producer.disconnect();
    assert.deepEqual(offsets, Array.from({ length: 10 }, (_, i) => i * 20));
    const stats = await httpJson(node, 'GET', '/admin/v2/persistent/public/default/js-idem/stats');
    assert.equal(stats.body.msgInCounter, 200);

    const consumer = kafka.consumer({ groupId: 'js-idem-reader' });
    await consumer.connect();
    await consumer.subscribe({ topic: 'js-idem', fromBeginning: true });
    const seen = [];
    await consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()); } });
    await waitFor(() => seen.length >= 200, WAIT_MS, '200 messages');
    await consumer.disconnect();
    assert.deepEqual(seen, Array.from({ length: 200 }, (_, i) => `v${i}`));
  });

  await t.test('a group of two shares the partitions and rebalances when one leaves', async () => {
    await admin.createTopics({ topics: [{ topic: 'js-group', numPartitions: 2 }] });
    const received = { a: [], b: [] };
    const assigned = { a: [], b: [] };
    const members = {};
    for (const name of ['a', 'b']) {
      const c = kafka.consumer({ groupId: 'js-workers', sessionTimeout: 10000, heartbeatInterval: 500,
        rebalanceTimeout: 10000 });
      c.on(c.events.GROUP_JOIN, (e) => { assigned[name] = e.payload.memberAssignment['js-group'] || []; });
      await c.connect();
      await c.subscribe({ topic: 'js-group', fromBeginning: true });
      await c.run({ eachMessage: async ({ partition, message }) => {
        received[name].push([partition, message.value.toString()]);
      } });
      members[name] = c;
    }
    await waitFor(() => assigned.a.length === 1 && assigned.b.length === 1, WAIT_MS, 'one partition each');
    assert.notEqual(assigned.a[0], assigned.b[0]);

    const producer = kafka.producer();
    await producer.connect();
    const send = (tag) => producer.send({ topic: 'js-group', messages: [
      { partition: 0, value: `${tag}-p0` }, { partition: 1, value: `${tag}-p1` }] });
    await send('first');
    await waitFor(() => received.a.length + received.b.length >= 2, WAIT_MS, 'first round');
    // Each member read only its own partition.
    assert.deepEqual(received.a.map(([p]) => p), [assigned.a[0]]);
    assert.deepEqual(received.b.map(([p]) => p), [assigned.b[0]]);

    // b leaves: a takes both partitions and reads the next round from both.
    await members.b.disconnect();
    await waitFor(() => assigned.a.length === 2, WAIT_MS, 'a assigned both partitions');
    await send('second');
    await waitFor(() => received.a.filter(([, v]) => v.startsWith('second')).length === 2, WAIT_MS, 'second round');
    assert.deepEqual(received.a.filter(([, v]) => v.startsWith('second')).map(([p]) => p).sort(), [0, 1]);
    await producer.disconnect();
    await members.a.disconnect();

    // The group's committed offsets are its subscriptions' cursors.
    const subs = await httpJson(node, 'GET', '/admin/v2/persistent/public/default/js-group-partition-0/subscriptions');
    assert.ok(subs.body.includes('js-workers'), JSON.stringify(subs.body));
    await admin.deleteGroups(['js-workers']);
    const gone = await httpJson(node, 'GET', '/admin/v2/persistent/public/default/js-group-partition-0/subscriptions');
    assert.ok(!gone.body.includes('js-workers'), JSON.stringify(gone.body));
    await assert.rejects(admin.deleteGroups(['js-no-such-group']),
      (e) => e.groups && e.groups[0].error && e.groups[0].error.type === 'GROUP_ID_NOT_FOUND');
  });
});

// DeleteRecords and AlterConfigs as KafkaJS's admin sends them, on a node
// whose ledgers hold 10 entries (records are deleted a closed ledger at a time).
test('KafkaJS admin: deleteTopicRecords and alterConfigs', async (t) => {
  const { node, kafka, admin } = await kafkaNode(t, 'kafkajs-admin-apis',
    ['--managed-ledger-max-entries-per-ledger', '10']);

  await t.test('deleteTopicRecords moves the low watermark to a ledger boundary', async () => {
    await admin.createTopics({ topics: [{ topic: 'js-del' }] });
    const producer = kafka.producer();
    await producer.connect();
    for (let i = 0; i < 25; i++) await producer.send({ topic: 'js-del', messages: [{ value: `v${i}` }] });
    await producer.disconnect();
    assert.deepEqual((await admin.fetchTopicOffsets('js-del')).map(({ low, high }) => [low, high]), [['0', '25']]);
    await admin.deleteTopicRecords({ topic: 'js-del', partitions: [{ partition: 0, offset: '15' }] });
    assert.deepEqual((await admin.fetchTopicOffsets('js-del')).map(({ low, high }) => [low, high]), [['10', '25']]);
    // The records from the new start on are intact.
    const consumer = kafka.consumer({ groupId: 'js-del-reader' });
    await consumer.connect();
    await consumer.subscribe({ topic: 'js-del', fromBeginning: true });
    const seen = [];
    await consumer.run({
      eachMessage: async ({ message }) => { seen.push([message.offset, message.value.toString()]); },
    });
    await waitFor(() => seen.length >= 15, WAIT_MS, 'records after the new start');
    await consumer.disconnect();
    assert.deepEqual(seen, Array.from({ length: 15 }, (_, i) => [`${i + 10}`, `v${i + 10}`]));
  });

  await t.test('alterConfigs sets retention, read back by describeConfigs and REST', async () => {
    await admin.createTopics({ topics: [{ topic: 'js-cfg' }] });
    await admin.alterConfigs({ validateOnly: false, resources: [{ type: 2, name: 'js-cfg',
      configEntries: [{ name: 'retention.ms', value: '3600000' }, { name: 'retention.bytes', value: '10485760' }] }] });
    const described = await admin.describeConfigs({ resources: [{ type: 2, name: 'js-cfg',
      configNames: ['retention.ms', 'retention.bytes'] }], includeSynonyms: false });
    const values = Object.fromEntries(described.resources[0].configEntries.map((e) => [e.configName, e.configValue]));
    assert.deepEqual(values, { 'retention.ms': '3600000', 'retention.bytes': '10485760' });
    const rest = await httpJson(node, 'GET', '/admin/v2/persistent/public/default/js-cfg/retention');
    assert.deepEqual(rest.body, { retentionTimeInMinutes: 60, retentionSizeInMB: 10 });
    await assert.rejects(admin.alterConfigs({ resources: [{ type: 2, name: 'js-cfg',
      configEntries: [{ name: 'cleanup.policy', value: 'shrink' }] }] }),
    (e) => e.type === 'INVALID_CONFIG' || /INVALID_CONFIG|cleanup.policy/.test(`${e.type} ${e.message}`));
  });
});
