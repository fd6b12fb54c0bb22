// amqplib over amqps:// against the real binary's AMQP TLS listener, with a
// CA and server certificate made by openssl at test time: the client that
// trusts the CA publishes and consumes; one that does not is refused.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const amqplib = require('amqplib');
const { Node, waitFor } = require('../pulsar_client/node');

let node;
let certs;

function openssl(...args) {
  execFileSync('openssl', args, { cwd: certs, stdio: 'ignore', timeout: 60000 });
}

test.before(async () => {
  certs = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-amqps-'));
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2',
    '-subj', '/CN=amqps test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  fs.writeFileSync(path.join(certs, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', '1', '-out',
    'server.pem', '-days', '2', '-extfile', 'san.ext');
  node = await new Node(undefined, ['--amqp-port-tls', '0', '--tls-certificate-file', path.join(certs, 'server.pem'),
    '--tls-key-file', path.join(certs, 'server.key')]).start();
});

test.after(async () => {
  assert.strictEqual(await node.stop(), 0);
  await node.close();
  fs.rmSync(certs, { recursive: true, force: true });
  setImmediate(() => process.exit());
});

test('amqps with the CA publishes and consumes', async () => {
  const conn = await amqplib.connect(`amqps://guest:guest@localhost:${node.ports.amqp_tls}/`,
    { ca: [fs.readFileSync(path.join(certs, 'ca.pem'))] });
  const ch = await conn.createChannel();
  await ch.assertQueue('amqps-node');
  for (let i = 0; i < 5; i++) ch.sendToQueue('amqps-node', Buffer.from(`m${i}`));
  const got = [];
  await ch.consume('amqps-node', (msg) => { got.push(msg.content.toString()); ch.ack(msg); });
  await waitFor(() => got.length >= 5, 10000, '5 messages over amqps');
  assert.deepStrictEqual(got, ['m0', 'm1', 'm2', 'm3', 'm4']);
  await conn.close();
});

test('amqps without the CA is refused', async () => {
  await assert.rejects(amqplib.connect(`amqps://guest:guest@localhost:${node.ports.amqp_tls}/`),
    /self-signed|unable to verify|certificate/);
});
