// Clusters of real magnetar processes for the node client tests: members
// joined by flag on loopback, each with its own data directory.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { Node, BIN } = require('./node');

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
  // Every member sees every other alive with its addresses (each refreshes
  // its view once a second), so any of them answers for all.
  for (const member of members) {
    for (;;) {
      const { body } = await getJson(member, '/admin/v2/brokers/standalone');
      if (body && body.length === size) break;
      if (Date.now() > deadline) throw new Error(`a member sees ${JSON.stringify(body)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { members, dir };
}

async function closeCluster({ members, dir }) {
  for (const node of members) await node.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

module.exports = { startCluster, closeCluster, getJson, freePort };
