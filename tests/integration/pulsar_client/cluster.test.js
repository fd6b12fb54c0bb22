// pulsar-flex across the members of a cluster: every client looks a topic
// up through whichever member it was given and is sent to the topic's owner.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { Consumer } = require('pulsar-flex');
const { waitFor } = require('./node');
const { startCluster, closeCluster, getJson } = require('./cluster');
const { flexProducer, flexConsumer } = require('./flex');

test.after(() => setImmediate(() => process.exit()));

test('a producer on one member and a consumer on another meet at the owner', async () => {
  const cluster = await startCluster(3);
  const [a, b, c] = cluster.members;
  try {
    const owners = new Set();
    for (let t = 0; t < 6; t++) {
      const topic = `persistent://public/default/meet-${t}`;
      const consumer = flexConsumer(b, topic, 'audit', Consumer.SUB_TYPES.EXCLUSIVE);
      await consumer.subscribe();
      const got = [];
      consumer.run({ onMessage: async ({ ack, message }) => { got.push(message.toString()); await ack(); } });
      const producer = flexProducer(a, topic);
      await producer.create();
      for (let i = 0; i < 5; i++) await producer.sendMessage({ payload: `m-${t}-${i}` });
      await waitFor(() => got.length >= 5, 20000, `5 messages of ${topic}`);
      assert.deepStrictEqual(got, [0, 1, 2, 3, 4].map((i) => `m-${t}-${i}`));
      await producer.close();
      await consumer.unsubscribe();
      // Every member names the same owner.
      const lookups = await Promise.all([a, b, c].map((n) => getJson(n, `/lookup/v2/topic/persistent/public/default/meet-${t}`)));
      const urls = lookups.map((l) => l.body.brokerUrl);
      assert.ok(urls.every((u) => u === urls[0]), `lookups disagree: ${urls}`);
      owners.add(urls[0]);
    }
    // Six topics over four bundles on three members: more than one owner.
    assert.ok(owners.size > 1, `every topic on one member: ${[...owners]}`);
  } finally {
    await closeCluster(cluster);
  }
});
