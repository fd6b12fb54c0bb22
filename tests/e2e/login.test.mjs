// The console against a node with token authentication on: it asks for a
// token, refuses a bad one with the server's reason, and shows the node once
// signed in; signing out asks again.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { BIN, Node, launchBrowser, waitFor, SCREENSHOTS } from './node.mjs';

const UI_TIMEOUT = 20000;

test('sign in with a token, refuse a bad one, sign out', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-e2e-keys-'));
  const key = path.join(dir, 'token.key');
  execFileSync(BIN, ['tokens', 'create-secret-key', '--output', key], { stdio: 'ignore' });
  const token = execFileSync(BIN, ['tokens', 'create', '--secret-key', `file://${key}`, '--subject', 'admin'])
    .toString().trim();
  const node = await new Node(['--authentication-enabled', '--token-secret-key', `file://${key}`]).start();
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(UI_TIMEOUT);
    await page.goto(node.url + '/');
    await page.getByTestId('login-form').waitFor();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'login.png'), fullPage: true });

    await page.getByTestId('login-token').fill('not-a-token');
    await page.getByTestId('login-submit').click();
    const error = await page.getByTestId('login-error').textContent();
    assert.match(error, /malformed token/);

    await page.getByTestId('login-token').fill(token);
    await page.getByTestId('login-submit').click();
    await waitFor(async () => (await page.getByTestId('overview-status').first().textContent({ timeout: 1000 }))
      === 'Healthy', UI_TIMEOUT, 'the overview once signed in');

    await page.getByTestId('sign-out').click();
    await page.getByTestId('login-form').waitFor();
  } finally {
    await browser.close();
    await node.close();
    fs.rmSync(dir, { recursive: true, force: true });
    setImmediate(() => process.exit());
  }
});
