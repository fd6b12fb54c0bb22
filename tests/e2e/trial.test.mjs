// The console of a node in trial mode: two visitors sign up at once, each in
// a browser of their own; each sees their own tenant, token (downloadable)
// and quick starts with their token and addresses filled in, and the topic
// they produce to shows up in their live topic list, not in the other's.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { BIN, Node, launchBrowser, waitFor, SCREENSHOTS } from './node.mjs';

const UI_TIMEOUT = 20000;

function produce(url, token, topic, message) {
  return new Promise((resolve, reject) => {
    execFile(BIN, ['produce', topic, '--url', url, '--token', token, '-m', message], { timeout: 30000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
  });
}

// One visitor: a browser context of their own (its own session storage),
// from the landing page to their trial page.
async function signUp(browser, node, name) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT);
  await page.goto(node.url + '/');
  await page.getByTestId('trial-signup-form').waitFor();
  if (name === 'first') await page.screenshot({ path: path.join(SCREENSHOTS, 'trial-signup.png'), fullPage: true });
  await page.getByTestId('trial-signup').click();
  const token = (await page.getByTestId('trial-token').textContent()).trim();
  const tenant = await page.getByTestId('trial-tenant').textContent();
  return { context, page, token, tenant };
}

test('two visitors sign up at once and each gets their own sandbox', async () => {
  const node = await new Node(['--trial', '--superuser-roles', 'admin', '--trial-expiry', '2h']).start();
  const browser = await launchBrowser();
  try {
    const visitors = await Promise.all([signUp(browser, node, 'first'), signUp(browser, node, 'second')]);
    const [a, b] = visitors;
    assert.match(a.tenant, /^trial-[a-z2-9]{12}$/);
    assert.match(b.tenant, /^trial-[a-z2-9]{12}$/);
    assert.notEqual(a.tenant, b.tenant);
    assert.notEqual(a.token, b.token);
    for (const v of visitors) {
      const { page, token, tenant } = v;
      assert.equal(page.url(), node.url + '/trial');
      assert.equal(await page.getByTestId('signed-in-role').textContent(), tenant);
      assert.equal(await page.getByTestId('trial-namespace').textContent(), `${tenant}/sandbox`);
      assert.match(await page.getByTestId('trial-time-left').textContent(), /^1h 5\dm|^2h 0m$/);
      // Quick starts: their own token and this node's addresses, for every protocol.
      const pulsar = await page.getByTestId('quickstart-pulsar-1').textContent();
      assert.ok(pulsar.includes(token), 'the Pulsar quick start carries the token');
      assert.ok(pulsar.includes(node.pulsarUrl));
      assert.ok(pulsar.includes(`persistent://${tenant}/sandbox/hello`));
      await page.getByTestId('quickstart-tab-kafka').click();
      const kafka = await page.getByTestId('quickstart-kafka-0').textContent();
      assert.ok(kafka.includes(`sasl.password='${token}'`));
      assert.ok(kafka.includes(`sasl.username=${tenant}/sandbox`));
      assert.ok(kafka.includes(`127.0.0.1:${node.ports.kafka}`));
      await page.getByTestId('quickstart-tab-amqp').click();
      const amqp = await page.getByTestId('quickstart-amqp-0').textContent();
      assert.ok(amqp.includes(token) && amqp.includes(`'${tenant}/sandbox'`) && amqp.includes(String(node.ports.amqp)));
      // The token, as a download.
      const [download] = await Promise.all([page.waitForEvent('download'),
        page.getByTestId('trial-download-token').click()]);
      assert.equal(download.suggestedFilename(), 'magnetar-trial-token.txt');
      assert.equal(fs.readFileSync(await download.path(), 'utf8').trim(), token);
    }
    // Each produces with their token; each topic list shows their own topic only.
    await Promise.all(visitors.map((v) =>
      produce(node.pulsarUrl, v.token, `persistent://${v.tenant}/sandbox/from-${v.tenant}`, 'hi')));
    for (const [me, other] of [[a, b], [b, a]]) {
      await waitFor(async () => (await me.page.getByTestId('trial-topics').textContent({ timeout: 1000 }))
        .includes(`from-${me.tenant}`), UI_TIMEOUT, 'the visitor\'s topic in their live list');
      assert.ok(!(await me.page.getByTestId('trial-topics').textContent()).includes(`from-${other.tenant}`));
      await me.page.getByTestId('quickstart-tab-pulsar').click();
    }
    await a.page.screenshot({ path: path.join(SCREENSHOTS, 'trial.png'), fullPage: true });
    // The operator sees both.
    const token = await new Promise((resolve, reject) => execFile(BIN, ['tokens', 'create', '--secret-key',
      `file://${path.join(node.dataDir, 'trial-token.key')}`, '--subject', 'admin'],
    (err, stdout) => (err ? reject(err) : resolve(stdout.trim()))));
    const res = await fetch(node.url + '/admin/v2/trials', { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200);
    assert.deepEqual((await res.json()).map((t) => t.tenant).sort(), [a.tenant, b.tenant].sort());
    for (const v of visitors) await v.context.close();
  } finally {
    await browser.close();
    await node.close();
  }
});
