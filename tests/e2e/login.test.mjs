// The console against a node with token authentication on: it asks for a
// token, refuses a bad one with the server's reason, and shows the node once
// signed in; signing out asks again.
import test, { after } from 'node:test';
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
  }
});

test('a tenant admin sees its tenants only, and nothing node-wide', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-e2e-keys-'));
  const key = path.join(dir, 'token.key');
  execFileSync(BIN, ['tokens', 'create-secret-key', '--output', key], { stdio: 'ignore' });
  const tokenOf = (role) => execFileSync(BIN, ['tokens', 'create', '--secret-key', `file://${key}`, '--subject', role])
    .toString().trim();
  const node = await new Node(['--authentication-enabled', '--token-secret-key', `file://${key}`,
    '--authorization-enabled', '--superuser-roles', 'root']).start();
  const asRoot = (method, p, body) => fetch(node.url + p, { method, body: body && JSON.stringify(body),
    headers: { Authorization: `Bearer ${tokenOf('root')}`, 'Content-Type': 'application/json' } });
  const browser = await launchBrowser();
  try {
    assert.equal((await asRoot('PUT', '/admin/v2/tenants/acme', { adminRoles: ['alice'] })).status, 204);
    assert.equal((await asRoot('PUT', '/admin/v2/tenants/globex', {})).status, 204);
    assert.equal((await asRoot('PUT', '/admin/v2/namespaces/acme/shop', {})).status, 204);

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(UI_TIMEOUT);
    await page.goto(node.url + '/');
    await page.getByTestId('login-token').fill(tokenOf('alice'));
    await page.getByTestId('login-submit').click();
    await page.getByTestId('tenants-table').waitFor();
    assert.equal(await page.getByTestId('signed-in-role').textContent(), 'alice');
    // No node-wide pages, no tenant creation: a tenant admin's console.
    const nav = await page.locator('nav.nav a').allTextContents();
    assert.deepEqual(nav, ['Tenants']);
    assert.equal(await page.getByTestId('create-tenant').count(), 0);
    await waitFor(async () => (await page.getByTestId('tenants-table').locator('tbody tr').count()) === 1,
      UI_TIMEOUT, 'the tenant list');
    const rows = await page.getByTestId('tenants-table').locator('tbody tr').allTextContents();
    assert.equal(rows.length, 1);
    assert.match(rows[0], /^acme/);
    assert.doesNotMatch(await page.locator('.layout').textContent(), /globex/);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'tenant-admin.png'), fullPage: true });

    // Its tenant: namespaces yes, the tenant's own settings (a superuser's) no.
    await page.goto(node.url + '/tenants/acme');
    await page.getByTestId('namespaces-table').getByText('acme/shop').waitFor();
    assert.equal(await page.getByTestId('tenant-settings-form').count(), 0);
  } finally {
    await browser.close();
    await node.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Chromium's pipes keep the event loop alive after the tests.
after(() => setImmediate(() => process.exit()));
