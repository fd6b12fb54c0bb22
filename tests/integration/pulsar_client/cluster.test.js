// pulsar-flex across the members of a cluster: every client looks a topic
// up through whichever member it was given and is sent to the topic's owner.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { Consumer } = require('pulsar-flex');
const { Node, waitFor, BIN } = require('./node');
const { flexProducer, flexConsumer } = require('./flex');

test.after(() => setImmediate(() => process.exit()));

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

async function getJson(node, urlPath) {
  const res = await fetch(`http://127.0.0.1:${node.ports.http}${urlPath}`);
  return { status: res.status, body: await res.json().catch(() => null) };
}

async function startCluster(size) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-cluster-'));
  const secret = path.join(dir, 'cluster.key');
  execFileSync(BIN, ['cluster', 'create-secret', '--output', secret], { stdio: 'ignore' });
  const members = [];
  let seed = null;
  for (let i = 0; i < size; i++) {
    const port = await freePort();
    const args = ['--cluster-port', String(port), '--cluster-secret-file', secret, '--reactors', '1'];
    if (seed) args.push('--join', seed);
    const node = await new Node(null, args, 'start').start();
    members.push(node);
    seed = seed || `127.0.0.1:${port}`;
  }
  // Every member alive in the leader's view, and so able to own topics.
  const deadline = Date.now() + 20000;
  for (;;) {
    const { body } = await getJson(members[0], '/admin/v2/cluster/nodes');
    if (body && body.length === size && body.every((n) => n.alive)) break;
    if (Date.now() > deadline) throw new Error(`members not all alive: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { members, dir };
}

async function closeCluster({ members, dir }) {
  for (const node of members) await node.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

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
