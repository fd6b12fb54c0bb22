// The web console in Debian's Chromium against the real binary: create a
// tenant, namespace, topic and subscription through the UI, produce with
// `magnetar produce` and watch the stats and the message browser, edit a
// policy and read it back through the REST API, see the server's errors.
// Each page is saved as a screenshot (node.mjs: SCREENSHOTS).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { BIN, Node, launchBrowser, waitFor, SCREENSHOTS } from './node.mjs';

const UI_TIMEOUT = 20000;

let node;
let browser;
let page;
const pageErrors = [];

test.before(async () => {
  node = await new Node().start();
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(UI_TIMEOUT);
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

test.after(async () => {
  if (browser) await browser.close();
  if (node) await node.close();
  // Idle keep-alive sockets would hold the process for many seconds; end it
  // once everything is closed, keeping the exit code the runner set.
  setImmediate(() => process.exit());
});

async function shot(name) {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

// Text of the element with this data-testid, once it satisfies `ok`.
async function textOf(testid, ok, what) {
  return waitFor(async () => {
    const t = await page.getByTestId(testid).first().textContent({ timeout: 1000 });
    return ok(t) ? t : null;
  }, UI_TIMEOUT, what);
}

test('the overview shows the node and its counts', async () => {
  await page.goto(node.url + '/');
  await textOf('overview-status', (t) => t === 'Healthy', 'status Healthy');
  assert.match(await page.getByTestId('overview-node').textContent(), /^Magnetar \d+\.\d+\.\d+ · cluster standalone · up /);
  const { body } = await node.rest('GET', '/admin/v2/tenants');
  assert.equal(await page.getByTestId('overview-tenants').textContent(), String(body.length));
  await shot('overview-empty');
});

test('a tenant, namespace and topic are created through the UI', async () => {
  await page.goto(node.url + '/');
  await page.getByRole('link', { name: 'Tenants' }).click();
  await page.getByTestId('tenants-table').getByRole('link', { name: 'public' }).waitFor();
  await shot('tenants');

  await page.getByLabel('Tenant name').fill('acme');
  await page.getByRole('button', { name: 'Create tenant' }).click();
  await page.waitForURL('**/tenants/acme');
  assert.equal((await node.rest('GET', '/admin/v2/tenants/acme')).status, 200);

  // Its settings, edited on its page, are what the REST API answers.
  const settings = page.getByTestId('tenant-settings-form');
  await settings.getByLabel('Admin roles').fill('ops, dev');
  await settings.getByRole('button', { name: 'Save settings' }).click();
  await settings.getByText('Saved.').waitFor();
  const tenant = (await node.rest('GET', '/admin/v2/tenants/acme')).body;
  assert.deepEqual([...tenant.adminRoles].sort(), ['dev', 'ops']);
  assert.deepEqual(tenant.allowedClusters, ['standalone']);

  await page.getByLabel('Namespace name').fill('shop');
  await page.getByRole('button', { name: 'Create namespace' }).click();
  await page.waitForURL('**/tenants/acme/shop');
  assert.deepEqual((await node.rest('GET', '/admin/v2/namespaces/acme')).body, ['acme/shop']);

  await page.getByLabel('Topic name').fill('orders');
  await page.getByRole('button', { name: 'Create topic' }).click();
  await page.waitForURL('**/tenants/acme/shop/persistent/orders');
  assert.equal((await node.rest('GET', '/admin/v2/persistent/acme/shop/orders/stats')).status, 200);

  // A partitioned one too, listed once with its partition count.
  await page.goto(node.url + '/tenants/acme/shop');
  await page.getByLabel('Topic name').fill('clicks');
  await page.getByLabel('Partitions').fill('3');
  await page.getByRole('button', { name: 'Create topic' }).click();
  await page.waitForURL('**/tenants/acme/shop/persistent/clicks');
  assert.deepEqual((await node.rest('GET', '/admin/v2/persistent/acme/shop/clicks/partitions')).body,
    { partitions: 3 });
  await page.goto(node.url + '/tenants/acme/shop');
  const table = page.getByTestId('topics-table');
  await table.getByRole('link', { name: 'clicks' }).waitFor();
  await table.getByRole('link', { name: 'orders' }).waitFor();
  assert.equal(await table.locator('tbody tr').count(), 2);
  await shot('namespace-topics');

  // The partitioned topic's page lists its partitions, each linked to its own page.
  await table.getByRole('link', { name: 'clicks' }).click();
  const partitions = page.getByTestId('partitions');
  await partitions.getByRole('link', { name: 'clicks-partition-2' }).waitFor();
  assert.equal(await partitions.locator('tbody tr').count(), 3);
  await partitions.getByRole('link', { name: 'clicks-partition-0' }).click();
  await page.waitForURL('**/tenants/acme/shop/persistent/clicks-partition-0');
  await textOf('topic-messages-in', (t) => t === '0', 'partition stats');

  // The sidebar tree followed: acme > shop is open, its topics listed once each.
  const tree = page.getByRole('complementary');
  await tree.getByRole('link', { name: 'orders', exact: true }).click();
  await page.waitForURL('**/tenants/acme/shop/persistent/orders');
  assert.equal(await tree.getByRole('link', { name: 'clicks', exact: true }).count(), 1);
  assert.equal(await tree.locator('a.current').textContent(), 'orders');
});

test('an invalid name shows the server\'s reason', async () => {
  const expected = await node.rest('PUT', '/admin/v2/tenants/' + encodeURIComponent('bad name!'), {});
  assert.equal(expected.status, 412);  // as Pulsar answers an invalid tenant name
  await page.goto(node.url + '/tenants');
  await page.getByLabel('Tenant name').fill('bad name!');
  await page.getByRole('button', { name: 'Create tenant' }).click();
  const alert = page.getByTestId('create-tenant').getByRole('alert');
  await alert.waitFor();
  const text = await alert.textContent();
  assert.ok(text.includes(expected.body.reason), `"${text}" shows "${expected.body.reason}"`);
  assert.ok(text.includes('412'));
  await shot('error-invalid-name');
});

test('produced messages show in the live stats and the message browser', async () => {
  await page.goto(node.url + '/tenants/acme/shop/persistent/orders');
  // A subscription from the earliest message, made through the UI.
  await page.getByLabel('New subscription name').fill('audit');
  await page.getByLabel('Start from').selectOption('earliest');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('[data-subscription="audit"]').waitFor();

  await node.produce('persistent://acme/shop/orders', '-m', '{"id":1,"item":"book"}', '-k', 'customer-7',
    '-p', 'source=e2e', '-n', '3');
  await node.produce('persistent://acme/shop/orders', '-m', 'plain text payload');

  await textOf('topic-messages-in', (t) => t === '4', 'messages in = 4');
  await textOf('backlog-audit', (t) => t === '4', 'backlog of audit = 4');
  // A replicated subscription says so.
  const marked = await node.rest('POST',
    '/admin/v2/persistent/acme/shop/orders/subscription/audit/replicatedSubscriptionStatus', true);
  assert.equal(marked.status, 204, JSON.stringify(marked.body));
  await page.locator('[data-subscription="audit"]').getByText('replicated').waitFor();
  await textOf('topic-backlog', (t) => t === '4 msgs', 'topic backlog 4 msgs');
  await textOf('topic-storage', (t) => t !== '0 B' && t !== '—', 'storage above zero');
  // A topic Pulsar made, with no retention policy: kept until acknowledged.
  await textOf('topic-retention', (t) => t === "until acknowledged (Pulsar's default)", 'the retention in effect');
  // The live chart drew a non-zero rate in (it keeps the last two minutes).
  await waitFor(async () => Number(await page.getByTestId('chart-topic-messages').getAttribute('data-max')) > 0,
    UI_TIMEOUT, 'a non-zero rate in the chart');

  await page.getByLabel('Subscription to peek').selectOption('audit');
  await page.getByRole('button', { name: 'Peek' }).click();
  const messages = page.getByTestId('message');
  await waitFor(async () => (await messages.count()) === 4, UI_TIMEOUT, 'four peeked messages');
  const first = await messages.nth(0).textContent();
  assert.ok(first.includes('customer-7'), first);
  assert.ok(first.includes('source=e2e'), first);
  assert.equal(await messages.nth(0).getByTestId('message-payload').textContent(),
    JSON.stringify({ id: 1, item: 'book' }, null, 2));
  assert.equal(await messages.nth(3).getByTestId('message-payload').textContent(), 'plain text payload');
  // One message by its id, as the peek showed it.
  const lastId = await messages.nth(3).getByTestId('message-id').textContent();
  await page.getByLabel('Message id').fill(lastId);
  await page.getByRole('button', { name: 'Show' }).click();
  await waitFor(async () => (await messages.count()) === 1, UI_TIMEOUT, 'one message by id');
  assert.equal(await messages.nth(0).getByTestId('message-payload').textContent(), 'plain text payload');
  await page.getByLabel('Message id').fill('not-an-id');
  await page.getByRole('button', { name: 'Show' }).click();
  await page.getByText('"not-an-id" is not a message id such as 12:34').waitFor();
  // Peeking acknowledges nothing.
  const stats = await node.rest('GET', '/admin/v2/persistent/acme/shop/orders/stats');
  assert.equal(stats.body.subscriptions.audit.msgBacklog, 4);
  await shot('topic');

  // The overview counts them too.
  await page.getByRole('link', { name: 'Overview' }).click();
  await textOf('overview-messages-in', (t) => t === '4', 'overview messages in = 4');
  await page.getByTestId('largest-backlogs').getByRole('link', { name: 'persistent://acme/shop/orders' }).waitFor();
  await shot('overview');
});

// The browser's datetime-local value for `ms` (the browser runs in this
// process's time zone).
function localDateTime(ms) {
  const d = new Date(ms);
  return new Date(ms - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
}

test('skip all, reset to a time, expire and delete act on the subscription', async () => {
  const backlog = async () =>
    (await node.rest('GET', '/admin/v2/persistent/acme/shop/orders/stats')).body.subscriptions.audit.msgBacklog;
  await page.goto(node.url + '/tenants/acme/shop/persistent/orders');
  await page.locator('[data-subscription="audit"]').waitFor();
  await page.getByLabel('Subscription', { exact: true }).selectOption('audit');
  await page.getByTestId('skip-all').click();
  await textOf('backlog-audit', (t) => t === '0', 'backlog of audit = 0');
  assert.equal(await backlog(), 0);

  // An hour ago is before every message: all four are back.
  await page.getByLabel('Reset to time').fill(localDateTime(Date.now() - 3600 * 1000));
  await page.getByTestId('reset-cursor').click();
  await textOf('backlog-audit', (t) => t === '4', 'backlog of audit back to 4');
  assert.equal(await backlog(), 4);

  // Every message is older than 0 seconds.
  await page.getByLabel('Expire older than seconds').fill('0');
  await page.getByTestId('expire').click();
  await textOf('backlog-audit', (t) => t === '0', 'backlog of audit expired to 0');
  assert.equal(await backlog(), 0);
  await shot('topic-subscription-actions');

  await page.getByTestId('delete-subscription').click();
  await page.getByTestId('delete-subscription').click();  // confirm
  await page.locator('[data-subscription="audit"]').waitFor({ state: 'detached' });
  assert.deepEqual((await node.rest('GET', '/admin/v2/persistent/acme/shop/orders/subscriptions')).body, []);
});

test('a connected consumer shows with its subscription and type; what it receives drains the backlog', async () => {
  await page.goto(node.url + '/tenants/acme/shop/persistent/orders');
  const consumer = spawn(BIN, ['consume', 'persistent://acme/shop/orders', '-s', 'live', '-t', 'Shared', '-n', '3',
    '--timeout', '60', '--url', node.pulsarUrl], { stdio: 'ignore' });
  const exited = new Promise((resolve) => consumer.on('exit', resolve));
  try {
    const row = page.getByTestId('consumers').locator('tbody tr');
    await row.first().waitFor();
    assert.match(await row.first().textContent(), /live/);
    // Which protocol it speaks and from where.
    assert.match(await row.first().textContent(), /Pulsar127\.0\.0\.1:\d+/);
    await page.locator('[data-subscription="live"]').getByText('Shared').waitFor();
    await node.produce('persistent://acme/shop/orders', '-m', 'to the live consumer', '-n', '3');
    // The consumer got its three messages and left; the subscription stays, drained.
    assert.equal(await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), UI_TIMEOUT))]), 0);
    await textOf('backlog-live', (t) => t === '0', 'backlog of live = 0');
    await waitFor(async () => (await page.getByTestId('consumers').getByText('No consumer is connected.').count()) === 1,
      UI_TIMEOUT, 'the consumer gone from the page');
    const stats = (await node.rest('GET', '/admin/v2/persistent/acme/shop/orders/stats')).body;
    assert.equal(stats.subscriptions.live.msgOutCounter, 3);
  } finally {
    if (consumer.exitCode === null) consumer.kill('SIGKILL');
  }
  assert.equal((await node.rest('DELETE', '/admin/v2/persistent/acme/shop/orders/subscription/live')).status, 204);
});

test('a message produced from the console is stored and can be peeked', async () => {
  await page.goto(node.url + '/tenants/acme/shop/persistent/orders');
  await page.getByLabel('New subscription name').fill('browser');
  await page.getByRole('button', { name: 'Create subscription' }).click();
  await page.locator('[data-subscription="browser"]').waitFor();

  const form = page.getByTestId('produce-form');
  await form.getByLabel('Payload').fill('{"from": "the console"}');
  await form.getByLabel('Key').fill('web-key');
  await form.getByLabel('Properties').fill('origin=console, n=1');
  await form.getByRole('button', { name: 'Produce message' }).click();
  await form.getByText(/^Stored as message \d+:\d+:-1\.$/).waitFor();
  await textOf('backlog-browser', (t) => t === '1', 'backlog of browser = 1');

  await page.getByLabel('Subscription to peek').selectOption('browser');
  await page.getByRole('button', { name: 'Peek' }).click();
  const message = page.getByTestId('message');
  await waitFor(async () => (await message.count()) === 1, UI_TIMEOUT, 'one peeked message');
  const text = await message.textContent();
  assert.ok(text.includes('web-key') && text.includes('origin=console') && text.includes('n=1'), text);
  assert.equal(await message.getByTestId('message-payload').textContent(),
    JSON.stringify({ from: 'the console' }, null, 2));
  await shot('topic-produce-and-peek');
});

test('a policy edited in the UI is what the REST API answers', async () => {
  await page.goto(node.url + '/tenants/acme/shop');
  await page.getByRole('tab', { name: 'Policies' }).click();
  const retention = page.getByTestId('policy-retention');
  await retention.getByLabel('retentionTimeInMinutes').fill('120');
  await retention.getByLabel('retentionSizeInMB').fill('512');
  await retention.getByRole('button', { name: 'Save' }).click();
  await retention.getByText('Saved.').waitFor();
  assert.deepEqual((await node.rest('GET', '/admin/v2/namespaces/acme/shop/retention')).body,
    { retentionTimeInMinutes: 120, retentionSizeInMB: 512 });

  const ttl = page.getByTestId('policy-ttl');
  await ttl.getByLabel('messageTTL').fill('-5');
  await ttl.getByRole('button', { name: 'Save' }).click();
  const expected = await node.rest('POST', '/admin/v2/namespaces/acme/shop/messageTTL', -5);
  assert.equal(expected.status, 400);
  const alert = ttl.getByRole('alert');
  await alert.waitFor();
  assert.ok((await alert.textContent()).includes(expected.body.reason));
  await shot('namespace-policies');

  // A reload shows what was saved (the page is served for its own URL).
  await page.reload();
  assert.equal(await page.getByTestId('policy-retention').getByLabel('retentionTimeInMinutes').inputValue(), '120');
});

test('the nodes page shows this node, the only member of a standalone node', async () => {
  await page.goto(node.url + '/nodes');
  const table = page.getByTestId('nodes-table');
  // The first answer replaces a 'Loading…' row.
  await waitFor(async () => (await table.locator('tbody tr').count()) === 1 &&
    !(await table.locator('tbody tr').first().textContent()).includes('Loading'), UI_TIMEOUT, 'the nodes row');
  const row = await table.locator('tbody tr').first().textContent();
  assert.ok(row.includes('standalone') && row.includes('leader'), row);
  assert.ok(row.includes(`127.0.0.1:${node.ports.http}`), row);
});

test('a cluster member\'s nodes page shows each broker\'s load and the load manager\'s moves', async () => {
  // A standalone node has no load manager: no such section.
  assert.equal(await page.getByTestId('load-decisions').count(), 0);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'magnetar-e2e-cluster-'));
  const secret = path.join(dir, 'cluster.key');
  execFileSync(BIN, ['cluster', 'create-secret', '--output', secret]);
  const member = await new Node(['--cluster-port', '0', '--cluster-secret-file', secret], 'start').start();
  try {
    await page.goto(member.url + '/nodes');
    const decisions = page.getByTestId('load-decisions');
    await waitFor(async () => (await decisions.locator('tbody tr').count()) === 1 &&
      (await decisions.locator('tbody tr').first().textContent()).includes('No bundle moved or split yet'), UI_TIMEOUT,
    'the load balancing section');
    // Its own load report: the CPU it used.
    const row = await waitFor(async () => {
      const t = await page.getByTestId('nodes-table').locator('tbody tr').first().textContent();
      return t.includes('%') ? t : null;
    }, UI_TIMEOUT, 'the member\'s CPU from its load report');
    assert.ok(row.includes('voter'), row);
  } finally {
    await member.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the metrics page lists what /metrics serves', async () => {
  await page.goto(node.url + '/monitoring');
  const table = page.getByTestId('metrics-table');
  // More families than one page holds: found through the search box.
  await table.locator('tbody tr').first().waitFor();
  await table.getByRole('searchbox').fill('pulsar_in_messages_total');
  await table.getByText('pulsar_in_messages_total').first().waitFor();
  await table.getByRole('searchbox').fill('pulsar_msg_backlog');
  await waitFor(async () => (await table.locator('tbody tr').count()) >= 1 &&
    (await table.locator('tbody tr').first().textContent()).includes('pulsar_msg_backlog'), UI_TIMEOUT,
  'filtered rows');
  await shot('metrics');
});

test('a deleted topic is gone; unknown pages say so', async () => {
  await page.goto(node.url + '/tenants/acme/shop/persistent/orders');
  await page.getByTestId('delete-topic').click();
  await page.getByTestId('delete-topic').click();  // confirm
  await page.waitForURL('**/tenants/acme/shop');
  assert.equal((await node.rest('GET', '/admin/v2/persistent/acme/shop/orders/stats')).status, 404);

  await page.goto(node.url + '/tenants/acme/shop/persistent/orders');
  const alert = page.getByRole('alert').first();
  await alert.waitFor();
  assert.ok((await alert.textContent()).includes('404'));

  await page.goto(node.url + '/tenants/acme/shop/extra/path');
  await page.getByRole('heading', { name: 'Page not found' }).waitFor();
  assert.deepEqual(pageErrors, []);
});

test('a traced message shows as a timeline of its stages, and an unknown key says it was never produced', async () => {
  const set = await node.rest('POST', '/admin/v2/namespaces/public/default/tracing', { mode: 'all' });
  assert.equal(set.status, 204);
  await node.produce('persistent://public/default/traced', '-m', 'where am I', '-k', 'user-7', '-p', 'order-id=T-1',
    '-p', 'traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  await page.goto(node.url + '/tenants/public/default/persistent/traced');
  const traces = page.getByTestId('trace');
  // Events reach the trace topic within a flush (100 ms): ask until they show.
  await waitFor(async () => {
    await page.getByLabel('Trace by').selectOption('property');
    await page.getByLabel('Trace value').fill('order-id=T-1');
    await page.getByRole('button', { name: 'Trace' }).click();
    return (await traces.locator('[data-stage="persisted"]').count()) === 1;
  }, UI_TIMEOUT, 'the received and persisted stages');
  const stages = await traces.first().locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.stage));
  assert.deepEqual(stages, ['received', 'persisted']);
  const text = await traces.first().textContent();
  assert.ok(text.includes('user-7'), text);
  assert.ok(text.includes('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'), text);
  assert.match(await traces.first().getByTestId('trace-message-id').textContent(), /^\d+:\d+$/);
  await shot('trace');

  await page.getByLabel('Trace by').selectOption('key');
  await page.getByLabel('Trace value').fill('nobody-sent-this');
  await page.getByRole('button', { name: 'Trace' }).click();
  const alert = page.getByTestId('trace-form').getByRole('alert');
  await alert.waitFor();
  assert.ok((await alert.textContent()).includes('never produced'));
});

test('a topic replicated to a cluster that cannot be reached shows its backlog and why', async () => {
  const ok = (r) => assert.ok(r.status === 204 || r.status === 200, JSON.stringify(r));
  ok(await node.rest('PUT', '/admin/v2/clusters/west',
    { serviceUrl: 'http://127.0.0.1:1', brokerServiceUrl: 'pulsar://127.0.0.1:1' }));
  ok(await node.rest('PUT', '/admin/v2/tenants/geo', { allowedClusters: ['standalone', 'west'] }));
  ok(await node.rest('PUT', '/admin/v2/namespaces/geo/ns'));
  ok(await node.rest('POST', '/admin/v2/namespaces/geo/ns/replication', ['standalone', 'west']));
  await node.produce('persistent://geo/ns/orders', '-m', 'to the other site', '-n', '3');
  await page.goto(node.url + '/tenants/geo/ns/persistent/orders');
  await textOf('replication-backlog-west', (t) => t === '3', 'a replication backlog of 3');
  const linkText = await textOf('replication-link-west', (t) => t.startsWith('down: '), 'the link down, and why');
  assert.ok(linkText.includes('127.0.0.1:1'), linkText);
  await shot('topic-replication');
});

test('the overview says when the node cannot be reached', async () => {
  await page.goto(node.url + '/');
  await textOf('overview-status', (t) => t === 'Healthy', 'status Healthy');
  await node.close();
  await textOf('overview-status', (t) => t === 'Unreachable', 'status Unreachable');
  const alert = page.getByRole('alert').first();
  assert.match(await alert.textContent(), /cannot be reached/);
  await shot('overview-unreachable');
});
