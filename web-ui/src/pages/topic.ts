// One topic: live stats and charts, producers, subscriptions and their
// actions, partitions, and the message browser (pages/messages.ts).
import { api, Domain, TopicStats } from '../api';
import { LiveChart } from '../chart';
import {
  busy, card, changed, dangerButton, every, fmtBytes, fmtNumber, fmtRate, h, inlineForm, link, navigate, notice,
  REFRESH_MS, replace,
} from '../dom';
import { namespaceHref, tenantHref, topicPageHref } from './links';
import { messageBrowser } from './messages';

// "pulsar" -> "Pulsar"; what the broker does not know shows as a dash.
function protocolName(p?: string): string {
  const names: Record<string, string> = { pulsar: 'Pulsar', kafka: 'Kafka', amqp: 'AMQP' };
  return p ? (names[p] ?? p) : '—';
}

export function topicPage(root: HTMLElement, [tenant, ns, domainName, topic]: string[]) {
  const domain = domainName as Domain;
  const full = `${domain}://${tenant}/${ns}/${topic}`;
  document.title = `${topic} · Magnetar`;
  const status = notice();
  const actionsNotice = notice();
  const cards = h('div', { class: 'cards' });
  const rateChart = new LiveChart('Messages per second',
    [{ label: 'in', color: '#6d4aff' }, { label: 'out', color: '#13a10e' }], fmtNumber, 60, 'chart-topic-messages');
  const byteChart = new LiveChart('Bytes per second',
    [{ label: 'in', color: '#6d4aff' }, { label: 'out', color: '#13a10e' }], fmtBytes, 60, 'chart-topic-bytes');
  const producers = h('div', { 'data-testid': 'producers' });
  const subscriptions = h('div', { 'data-testid': 'subscriptions' });
  const consumers = h('div', { 'data-testid': 'consumers' });
  const partitionsBox = h('div', { 'data-testid': 'partitions' });
  const partitionedNote = h('p', { class: 'muted' });
  const subscriptionSelects: HTMLSelectElement[] = [];
  let partitioned = 0;

  const unload = h('button', { class: 'small' }, 'Unload');
  unload.addEventListener('click', () => busy(unload, actionsNotice, async () => {
    await api.unload(domain, tenant, ns, topic);
    actionsNotice.ok('Unloaded: the topic is loaded again on next use.');
  }));
  const remove = dangerButton('Delete topic', actionsNotice, async () => {
    await api.deleteTopic(domain, tenant, ns, topic, partitioned > 0);
    changed();
    navigate(namespaceHref(tenant, ns));
  }, { 'data-testid': 'delete-topic' });

  root.append(
    h('div', { class: 'crumbs' }, link('/tenants', 'Tenants'), ' / ', link(tenantHref(tenant), tenant), ' / ',
      link(namespaceHref(tenant, ns), ns), ' / ', topic),
    h('div', { class: 'title-row' }, h('h1', {}, topic), h('span', { class: 'badge' }, domain),
      h('span', { class: 'spacer' }), unload, remove),
    h('p', { class: 'muted mono' }, full),
    actionsNotice.el, status.el, cards,
    h('div', { class: 'charts' }, rateChart.el, byteChart.el),
    partitionsBox,
    h('h2', {}, 'Producers'), producers,
    h('h2', {}, 'Subscriptions'), subscriptions,
    h('h2', {}, 'Consumers'), consumers,
    subscriptionActions(),
    h('h2', {}, 'Messages'),
    partitionedNote,
    produceForm(),
    messageBrowser(domain, tenant, ns, topic, subscriptionSelects),
  );

  function produceForm() {
    const payload = h('textarea', { name: 'payload', rows: 3, placeholder: 'payload (text or JSON)',
      'aria-label': 'Payload' });
    const key = h('input', { name: 'key', placeholder: 'key (optional)', 'aria-label': 'Key' });
    const props = h('input', { name: 'properties', placeholder: 'properties: a=1, b=2', 'aria-label': 'Properties' });
    const form = inlineForm([payload, key, props], 'Produce message', async (n) => {
      const properties: Record<string, string> = {};
      for (const part of props.value.split(',').map((p) => p.trim()).filter(Boolean)) {
        const eq = part.indexOf('=');
        if (eq <= 0) throw new Error(`"${part}" is not key=value`);
        properties[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
      }
      const id = await api.produce(domain, tenant, ns, topic, payload.value, key.value.trim(), properties);
      n.ok(`Stored as message ${id}.`);
      refresh();
    }, 'produce-form');
    form.classList.add('produce-form');
    return form;
  }

  function subscriptionActions() {
    const n = notice();
    const select = h('select', { name: 'subscription', 'aria-label': 'Subscription' });
    subscriptionSelects.push(select);
    const sub = () => {
      if (!select.value) throw new Error('Choose a subscription first.');
      return select.value;
    };
    const when = h('input', { type: 'datetime-local', name: 'resetTime', 'aria-label': 'Reset to time', step: 1 });
    const seconds = h('input', { type: 'number', name: 'expireSeconds', min: 0, value: 3600,
      'aria-label': 'Expire older than seconds' });
    const button = (label: string, action: () => Promise<void>, testid: string) => {
      const b = h('button', { class: 'small', type: 'button', 'data-testid': testid }, label);
      b.addEventListener('click', () => busy(b, n, action));
      return b;
    };
    const name = h('input', { name: 'newSubscription', placeholder: 'subscription name', required: true,
      'aria-label': 'New subscription name' });
    const from = h('select', { name: 'from', 'aria-label': 'Start from' },
      h('option', { value: 'latest' }, 'from latest'), h('option', { value: 'earliest' }, 'from earliest'));
    return h('div', { class: 'panel', 'data-testid': 'subscription-actions' },
      h('h3', {}, 'Subscription actions'),
      h('div', { class: 'action-row' }, select,
        button('Skip all (clear backlog)', async () => {
          const s = sub();
          await api.skipAll(domain, tenant, ns, topic, s);
          n.ok(`Backlog of ${s} cleared.`);
          refresh();
        }, 'skip-all'),
        dangerButton('Delete subscription', n, async () => {
          const s = sub();
          await api.deleteSubscription(domain, tenant, ns, topic, s);
          n.ok(`Subscription ${s} deleted.`);
          refresh();
        }, { 'data-testid': 'delete-subscription', type: 'button' })),
      h('div', { class: 'action-row' }, when, button('Reset cursor to this time', async () => {
        const s = sub();
        const t = when.value ? new Date(when.value).getTime() : NaN;
        if (Number.isNaN(t)) throw new Error('Pick a date and time to reset to.');
        await api.resetCursor(domain, tenant, ns, topic, s, t);
        n.ok(`${s} now starts at ${new Date(t).toLocaleString()}.`);
        refresh();
      }, 'reset-cursor')),
      h('div', { class: 'action-row' }, seconds, button('Expire messages older than (s)', async () => {
        const s = sub();
        await api.expireMessages(domain, tenant, ns, topic, s, Number(seconds.value));
        n.ok(`Messages of ${s} older than ${seconds.value}s expired.`);
        refresh();
      }, 'expire')),
      inlineForm([name, from], 'Create subscription', async (fn) => {
        await api.createSubscription(domain, tenant, ns, topic, name.value.trim(), from.value);
        fn.ok(`Subscription ${name.value.trim()} created.`);
        name.value = '';
        refresh();
      }, 'create-subscription'),
      n.el);
  }

  function show(s: TopicStats) {
    const subs = Object.entries(s.subscriptions ?? {});
    const backlog = subs.reduce((sum, [, v]) => sum + (v.msgBacklog ?? 0), 0);
    replace(cards,
      card('Rate in', fmtRate(s.msgRateIn, 'msg'), 'topic-rate-in'),
      card('Rate out', fmtRate(s.msgRateOut, 'msg'), 'topic-rate-out'),
      card('Throughput in', fmtBytes(s.msgThroughputIn) + '/s'),
      card('Throughput out', fmtBytes(s.msgThroughputOut) + '/s'),
      card('Messages in', fmtNumber(s.msgInCounter), 'topic-messages-in'),
      card('Backlog', `${fmtNumber(backlog)} msgs`, 'topic-backlog'),
      card('Storage', fmtBytes(s.storageSize), 'topic-storage'),
      card('Producers', String(s.publishers?.length ?? 0)),
    );
    rateChart.push([s.msgRateIn, s.msgRateOut]);
    byteChart.push([s.msgThroughputIn, s.msgThroughputOut]);
    replace(producers, (s.publishers ?? []).length === 0
      ? h('p', { class: 'empty-state' }, 'No producer is connected.')
      : h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Producer'), h('th', {}, 'Protocol'), h('th', {}, 'Address'),
        h('th', { class: 'num' }, 'Rate in'), h('th', { class: 'num' }, 'Throughput in'))),
      h('tbody', {}, s.publishers.map((p) => h('tr', {}, h('td', {}, p.producerName),
        h('td', {}, protocolName(p.protocol)), h('td', {}, p.address || '—'),
 h('td', { class: 'num' }, fmtRate(p.msgRateIn, 'msg')),
        h('td', { class: 'num' }, fmtBytes(p.msgThroughputIn) + '/s'))))));
    replace(subscriptions, subs.length === 0
      ? h('p', { class: 'empty-state' }, 'No subscriptions. Create one below, or attach a consumer.')
      : h('table', {}, h('thead', {}, h('tr', {}, ['Subscription', 'Type', 'Backlog', 'Rate out', 'Consumers',
        'Unacked'].map((t, i) => h('th', { class: i >= 2 ? 'num' : undefined }, t)))),
      h('tbody', {}, subs.map(([name, v]) => h('tr', { 'data-subscription': name },
        h('td', {}, name), h('td', {}, v.type ?? '—'),
        h('td', { class: 'num', 'data-testid': `backlog-${name}` }, fmtNumber(v.msgBacklog)),
        h('td', { class: 'num' }, fmtRate(v.msgRateOut, 'msg')),
        h('td', { class: 'num' }, String(v.consumers?.length ?? 0)),
        h('td', { class: 'num' }, fmtNumber(v.unackedMessages ?? 0)))))));
    const attached = subs.flatMap(([sub, v]) => (v.consumers ?? []).map((c) => ({ sub, c })));
    replace(consumers, attached.length === 0
      ? h('p', { class: 'empty-state' }, 'No consumer is connected.')
      : h('table', {}, h('thead', {}, h('tr', {}, ['Consumer', 'Subscription', 'Protocol', 'Address', 'Rate out', 'Throughput out',
        'Permits', 'Unacked'].map((t, i) => h('th', { class: i >= 4 ? 'num' : undefined }, t)))),
      h('tbody', {}, attached.map(({ sub, c }) => h('tr', { 'data-consumer': c.consumerName },
        h('td', {}, c.consumerName || '—'), h('td', {}, sub),
        h('td', {}, protocolName(c.protocol)), h('td', {}, c.address || '—'),
        h('td', { class: 'num' }, fmtRate(c.msgRateOut, 'msg')),
        h('td', { class: 'num' }, fmtBytes(c.msgThroughputOut) + '/s'),
        h('td', { class: 'num' }, fmtNumber(c.availablePermits ?? 0)),
        h('td', { class: 'num' }, fmtNumber(c.unackedMessages ?? 0)))))));
    for (const select of subscriptionSelects) {
      const chosen = select.value;
      const names = subs.map(([n]) => n);
      if (names.join('\n') !== [...select.options].map((o) => o.value).join('\n')) {
        replace(select, names.length === 0 ? h('option', { value: '' }, '(no subscriptions)')
          : names.map((n) => h('option', { value: n, selected: n === chosen }, n)));
      }
    }
    if (s.partitions && Object.keys(s.partitions).length > 0) {
      partitionedNote.textContent = 'A partitioned topic: produce, peek and subscription actions work on its ' +
        'partitions, listed above.';
      replace(partitionsBox, h('h2', {}, `Partitions (${Object.keys(s.partitions).length})`),
        h('table', {}, h('thead', {}, h('tr', {}, ['Partition', 'Rate in', 'Rate out', 'Backlog', 'Storage'].map((t, i) =>
          h('th', { class: i ? 'num' : undefined }, t)))),
        h('tbody', {}, Object.entries(s.partitions).map(([name, p]) => {
          const local = name.slice(name.lastIndexOf('/') + 1);
          const pb = Object.values(p.subscriptions ?? {}).reduce((sum, v) => sum + (v.msgBacklog ?? 0), 0);
          return h('tr', {}, h('td', {}, link(topicPageHref(domain, tenant, ns, local), local)),
            h('td', { class: 'num' }, fmtRate(p.msgRateIn, 'msg')), h('td', { class: 'num' }, fmtRate(p.msgRateOut, 'msg')),
            h('td', { class: 'num' }, fmtNumber(pb)), h('td', { class: 'num' }, fmtBytes(p.storageSize)));
        }))));
    }
  }

  async function refresh() {
    try {
      show(partitioned > 0 ? await api.partitionedStats(domain, tenant, ns, topic)
        : await api.stats(domain, tenant, ns, topic));
      status.clear();
    } catch (e) {
      status.error(e);
    }
  }

  let stop: () => void = () => {};
  let left = false;
  (async () => {
    try {
      partitioned = (await api.partitions(domain, tenant, ns, topic)).partitions;
    } catch {
      partitioned = 0;
    }
    if (!left) stop = every(REFRESH_MS, refresh);
  })();
  return () => {
    left = true;
    stop();
  };
}
