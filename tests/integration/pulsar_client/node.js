// Starts the real magnetar binary for Node tests: its own data directory,
// port 0 everywhere, ports read from <data-dir>/ports.json. Every wait is
// bounded.
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const BIN = process.env.MAGNETAR_BIN || path.join(__dirname, '../../../build/magnetar');

async function waitFor(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

class Node {
  // `extraArgs`: more flags of `command` (`magnetar standalone`, or `start` for a cluster member).
  constructor(dataDir, extraArgs = [], command = 'standalone') {
    this.dataDir = dataDir || fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-node-'));
    this.extraArgs = extraArgs;
    this.command = command;
    this.ownsDir = !dataDir;
    this.log = '';
  }

  async start() {
    const portsFile = path.join(this.dataDir, 'ports.json');
    fs.rmSync(portsFile, { force: true });
    this.proc = spawn(BIN, [this.command, '--data-dir', this.dataDir, '--http-port', '0', '--pulsar-port', '0',
      '--kafka-port', '0', '--amqp-port', '0', ...this.extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code) => resolve(code)));
    this.proc.stdout.on('data', (d) => { this.log += d; });
    this.proc.stderr.on('data', (d) => { this.log += d; });
    this.ports = await waitFor(() => {
      try { return JSON.parse(fs.readFileSync(portsFile, 'utf8')); } catch { return null; }
    }, 20000, 'ports.json');
    return this;
  }

  get pulsarServers() { return [`127.0.0.1:${this.ports.pulsar}`]; }

  // SIGTERM; resolves to the exit code (rejects if it takes over 20 s).
  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return this.proc && this.proc.exitCode;
    this.proc.kill('SIGTERM');
    const timer = new Promise((_, reject) => setTimeout(() => reject(new Error('no exit within 20 s')), 20000));
    return Promise.race([this.exited, timer]);
  }

  async close() {
    try { await this.stop(); } catch { this.proc.kill('SIGKILL'); }
    if (this.ownsDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

module.exports = { Node, waitFor, BIN };
