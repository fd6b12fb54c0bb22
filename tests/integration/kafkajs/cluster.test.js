// KafkaJS across the members of a cluster: a producer given one member
// writes to partitions that different members lead, and a consumer group
// given another member reads them all and resumes from its committed offsets.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');
const { waitFor } = require('../pulsar_client/node.js');
const { startCluster, closeCluster } = require('../pulsar_client/cluster.js');

const WAIT_MS = 30000;

test.after(() => setImmediate(() => process.exit()));

function client(node, id) {
  return new Kafka({ clientId: id, brokers: [`127.0.0.1:${node.ports.kafka}`], logLevel: logLevel.NOTHING,
    retry: { retries: 8 } });
}

async function readAll(kafka, group, topic, count) {
  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await consumer.run({ eachMessage: async ({ partition, message }) => {
    got.push({ partition, value: message.value.toString() });
  } });
  await waitFor(() => got.length >= count, WAIT_MS, `${count} messages of ${topic}`);
  await consumer.disconnect();  // commits what it read
  return got;
}

test('KafkaJS produces to partitions led by different members and a group reads them through another', async () => {
  const cluster = await startCluster(3);
  const [a, b, c] = cluster.members;
  try {
    const admin = client(a, 'cluster-admin').admin();
    await admin.connect();
    assert.equal(await admin.createTopics({ topics: [{ topic: 'spread-js', numPartitions: 6 }],
      waitForLeaders: true }), true);
    const md = await admin.fetchTopicMetadata({ topics: ['spread-js'] });
    const leaders = new Set(md.topics[0].partitions.map((p) => p.leader));
    assert.ok(leaders.size > 1, `one member leads every partition: ${[...leaders]}`);
    const brokers = (await admin.describeCluster()).brokers;
    assert.equal(brokers.length, 3);
    assert.deepEqual(brokers.map((x) => x.port).sort(), [a, b, c].map((n) => n.ports.kafka).sort());
    await admin.disconnect();

    const producer = client(b, 'cluster-producer').producer({ idempotent: true });
    await producer.connect();
    for (let partition = 0; partition < 6; partition++) {
      await producer.send({ topic: 'spread-js', acks: -1,
        messages: [0, 1, 2].map((i) => ({ partition, value: `p${partition}-m${i}` })) });
    }
    await producer.disconnect();

    const got = await readAll(client(c, 'cluster-reader'), 'js-readers', 'spread-js', 18);
    for (let partition = 0; partition < 6; partition++) {
      assert.deepEqual(got.filter((m) => m.partition === partition).map((m) => m.value),
        [0, 1, 2].map((i) => `p${partition}-m${i}`), `partition ${partition}, in order`);
    }
    // The group's offsets live with each partition's owner: the group resumes
    // through a different member with only what came after.
    const more = client(a, 'cluster-producer-2').producer();
    await more.connect();
    await more.send({ topic: 'spread-js', messages: [{ partition: 4, value: 'later' }] });
    await more.disconnect();
    const resumed = await readAll(client(a, 'cluster-reader-2'), 'js-readers', 'spread-js', 1);
    assert.deepEqual(resumed.map((m) => m.value), ['later']);
  } finally {
    await closeCluster(cluster);
  }
});
