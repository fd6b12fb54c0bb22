// Starts the real magnetar binary for the console tests: its own data
// directory, port 0 everywhere, ports read from <data-dir>/ports.json; and
// Debian's Chromium through playwright-core. Every wait is bounded.
import { spawn, execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.MAGNETAR_BIN || path.join(here, '../../build/magnetar');
export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
// Where screenshots go: docs/screenshots when refreshing them on purpose
// (MAGNETAR_SCREENSHOTS=docs/screenshots), a temporary directory otherwise.
export const SCREENSHOTS = process.env.MAGNETAR_SCREENSHOTS
  ? path.resolve(process.env.MAGNETAR_SCREENSHOTS)
  : fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-console-shots-'));

export async function waitFor(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      if (e instanceof Fatal) throw e;
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// An error that ends a waitFor at once instead of being retried.
export class Fatal extends Error {}

export class Node {
  // `extraArgs`: more `magnetar <command>` flags (standalone, or start for a cluster member).
  constructor(extraArgs = [], command = 'standalone') {
    this.extraArgs = extraArgs;
    this.command = command;
    this.dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-e2e-'));
    this.log = '';
  }

  async start() {
    const portsFile = path.join(this.dataDir, 'ports.json');
    this.proc = spawn(BIN, [this.command, '--data-dir', this.dataDir, '--http-port', '0', '--pulsar-port', '0',
      '--kafka-port', '0', '--amqp-port', '0', ...this.extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code) => resolve(code)));
    this.proc.stdout.on('data', (d) => { this.log += d; });
    this.proc.stderr.on('data', (d) => { this.log += d; });
    let spawnError = null;
    this.proc.on('error', (e) => { spawnError = e; });
    this.ports = await waitFor(() => {
      if (spawnError) throw new Fatal(`cannot start ${BIN}: ${spawnError.message}`);
      if (this.proc.exitCode !== null) throw new Fatal(`magnetar exited with ${this.proc.exitCode}: ${this.log}`);
      try { return JSON.parse(fs.readFileSync(portsFile, 'utf8')); } catch { return null; }
    }, 20000, 'ports.json');
    return this;
  }

  get url() { return `http://127.0.0.1:${this.ports.http}`; }
  get pulsarUrl() { return `pulsar://127.0.0.1:${this.ports.pulsar}`; }

  // The REST API directly: { status, body } with body parsed when JSON.
  async rest(method, p, body) {
    const res = await fetch(this.url + p, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed = text;
    try { parsed = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, body: parsed };
  }

  // `magnetar produce` against this node; resolves with its stdout.
  produce(topic, ...args) {
    return new Promise((resolve, reject) => {
      execFile(BIN, ['produce', topic, '--url', this.pulsarUrl, ...args], { timeout: 30000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`magnetar produce failed: ${err.message}\n${stderr}`));
        else resolve(stdout);
      });
    });
  }

  async close() {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGTERM');
      const timer = new Promise((resolve) => setTimeout(() => resolve('timeout'), 20000));
      if (await Promise.race([this.exited, timer]) === 'timeout') this.proc.kill('SIGKILL');
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    timeout: 60000,
  });
}
