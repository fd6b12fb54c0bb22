// One topic: live stats and charts, producers, subscriptions and their
// actions, partitions, and the message browser (pages/messages.ts).
import { ComponentChildren, Fragment, h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Domain, Retention, TopicStats } from '../api';
import { LiveChart, record } from '../chart';
import {
  ActionButton, busy, card, changed, dangerButton, every, fmtBytes, fmtNumber, fmtRate, inlineForm, link, navigate,
  Notice, REFRESH_MS, useNotice,
} from '../dom';
import { namespaceHref, tenantHref, topicPageHref } from './links';
import { MessageBrowser, subscriptionOptions } from './messages';
import { TraceView } from './trace';
import type { PageProps } from '../main';

const CHART_SAMPLES = 60;
const SERIES = [{ label: 'in', color: '#6d4aff' }, { label: 'out', color: '#13a10e' }];

// "pulsar" -> "Pulsar"; what the broker does not know shows as a dash.
function protocolName(p?: string): string {
  const names: Record<string, string> = { pulsar: 'Pulsar', kafka: 'Kafka', amqp: 'AMQP' };
  return p ? (names[p] ?? p) : '—';
}

interface Where {
  domain: Domain;
  tenant: string;
  ns: string;
  topic: string;
}

function ProduceForm({ where: { domain, tenant, ns, topic }, refresh }: { where: Where; refresh: () => void }) {
  const payload = useRef<HTMLTextAreaElement>(null);
  const key = useRef<HTMLInputElement>(null);
  const props = useRef<HTMLInputElement>(null);
  return inlineForm([
    h('textarea', { ref: payload, name: 'payload', rows: 3, placeholder: 'payload (text or JSON)',
      'aria-label': 'Payload' }),
    h('input', { ref: key, name: 'key', placeholder: 'key (optional)', 'aria-label': 'Key' }),
    h('input', { ref: props, name: 'properties', placeholder: 'properties: a=1, b=2', 'aria-label': 'Properties' }),
  ], 'Produce message', async (n) => {
    const properties: Record<string, string> = {};
    for (const part of props.current!.value.split(',').map((p) => p.trim()).filter(Boolean)) {
      const eq = part.indexOf('=');
      if (eq <= 0) throw new Error(`"${part}" is not key=value`);
      properties[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
    }
    const id = await api.produce(domain, tenant, ns, topic, payload.current!.value, key.current!.value.trim(),
      properties);
    n.ok(`Stored as message ${id}.`);
    refresh();
  }, 'produce-form', 'produce-form');
}

// What "replicated" beside a subscription means.
const replicatedHint = 'Acknowledgements reach the other clusters: a consumer that fails over resumes where it was';

function SubscriptionActions({ where: { domain, tenant, ns, topic }, subscriptions, refresh }: {
  where: Where; subscriptions: string[]; refresh: () => void;
}) {
  const n = useNotice();
  const select = useRef<HTMLSelectElement>(null);
  const when = useRef<HTMLInputElement>(null);
  const seconds = useRef<HTMLInputElement>(null);
  const name = useRef<HTMLInputElement>(null);
  const from = useRef<HTMLSelectElement>(null);
  const sub = () => {
    if (!select.current!.value) throw new Error('Choose a subscription first.');
    return select.current!.value;
  };
  const button = (label: string, action: () => Promise<void>, testid: string) =>
    h(ActionButton, { label, n, action, attrs: { 'data-testid': testid } });
  return h('div', { class: 'panel', 'data-testid': 'subscription-actions' },
    h('h3', {}, 'Subscription actions'),
    h('div', { class: 'action-row' },
      h('select', { ref: select, name: 'subscription', 'aria-label': 'Subscription' },
        subscriptions.length ? subscriptionOptions(subscriptions) : null),
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
    h('div', { class: 'action-row' },
      h('input', { ref: when, type: 'datetime-local', name: 'resetTime', 'aria-label': 'Reset to time', step: 1 }),
      button('Reset cursor to this time', async () => {
        const s = sub();
        const t = when.current!.value ? new Date(when.current!.value).getTime() : NaN;
        if (Number.isNaN(t)) throw new Error('Pick a date and time to reset to.');
        await api.resetCursor(domain, tenant, ns, topic, s, t);
        n.ok(`${s} now starts at ${new Date(t).toLocaleString()}.`);
        refresh();
      }, 'reset-cursor')),
    h('div', { class: 'action-row' },
      h('input', { ref: seconds, type: 'number', name: 'expireSeconds', min: 0, defaultValue: '3600',
        'aria-label': 'Expire older than seconds' }),
      button('Expire messages older than (s)', async () => {
        const s = sub();
        await api.expireMessages(domain, tenant, ns, topic, s, Number(seconds.current!.value));
        n.ok(`Messages of ${s} older than ${seconds.current!.value}s expired.`);
        refresh();
      }, 'expire')),
    inlineForm([
      h('input', { ref: name, name: 'newSubscription', placeholder: 'subscription name', required: true,
        'aria-label': 'New subscription name' }),
      h('select', { ref: from, name: 'from', 'aria-label': 'Start from' },
        h('option', { value: 'latest' }, 'from latest'), h('option', { value: 'earliest' }, 'from earliest')),
    ], 'Create subscription', async (fn: Notice) => {
      await api.createSubscription(domain, tenant, ns, topic, name.current!.value.trim(), from.current!.value);
      fn.ok(`Subscription ${name.current!.value.trim()} created.`);
      name.current!.value = '';
      refresh();
    }, 'create-subscription'),
    n.el);
}

function table(headers: string[], numericFrom: number, rows: ComponentChildren) {
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((t, i) =>
    h('th', { class: i >= numericFrom ? 'num' : undefined }, t)))), h('tbody', {}, rows));
}

function num(value: ComponentChildren, attrs: Record<string, string> = {}) {
  return h('td', { class: 'num', ...attrs }, value);
}

// "7 d, no size limit (Kafka's default)": what keeps this topic's data.
function fmtRetention(r: Retention): string {
  const time = r.retentionTimeInMinutes < 0 ? 'forever'
    : r.retentionTimeInMinutes === 0 ? 'until acknowledged'
    : r.retentionTimeInMinutes % 1440 === 0 ? `${r.retentionTimeInMinutes / 1440} d`
    : r.retentionTimeInMinutes % 60 === 0 ? `${r.retentionTimeInMinutes / 60} h` : `${r.retentionTimeInMinutes} min`;
  const size = r.retentionSizeInMB < 0 ? 'no size limit' : r.retentionSizeInMB === 0 ? '' : `${r.retentionSizeInMB} MB`;
  const from: Record<string, string> = { topic: 'topic policy', namespace: 'namespace policy',
    'kafka-default': "Kafka's default", 'pulsar-default': "Pulsar's default" };
  return [time, size].filter((x) => x).join(', ') + (r.source ? ` (${from[r.source] ?? r.source})` : '');
}

export function TopicPage({ params: [tenant, ns, domainName, topic] }: PageProps) {
  const domain = domainName as Domain;
  const where: Where = { domain, tenant, ns, topic };
  const full = `${domain}://${tenant}/${ns}/${topic}`;
  const status = useNotice();
  const actionsNotice = useNotice();
  const [stats, setStats] = useState<TopicStats | null>(null);
  const [samples, setSamples] = useState(0);
  const rates = useRef<number[][]>([[], []]);
  const bytes = useRef<number[][]>([[], []]);
  const partitioned = useRef(0);
  const [unloading, setUnloading] = useState(false);
  const [retention, setRetention] = useState<Retention | null>(null);

  async function refresh() {
    try {
      const s = partitioned.current > 0 ? await api.partitionedStats(domain, tenant, ns, topic)
        : await api.stats(domain, tenant, ns, topic);
      record(rates.current, [s.msgRateIn, s.msgRateOut], CHART_SAMPLES);
      record(bytes.current, [s.msgThroughputIn, s.msgThroughputOut], CHART_SAMPLES);
      setStats(s);
      setSamples((n) => n + 1);
      status.clear();
    } catch (e) {
      status.error(e);
    }
  }

  useEffect(() => {
    document.title = `${topic} · Magnetar`;
    let stop: () => void = () => {};
    let left = false;
    (async () => {
      try {
        partitioned.current = (await api.partitions(domain, tenant, ns, topic)).partitions;
      } catch {
        partitioned.current = 0;
      }
      if (!left) stop = every(REFRESH_MS, refresh);
      if (domain === 'persistent') {
        try {
          const r = await api.retentionInEffect(domain, tenant, ns, topic);
          if (!left) setRetention(r);
        } catch {
          // Shown as unknown.
        }
      }
    })();
    return () => {
      left = true;
      stop();
    };
  }, []);

  const s = stats;
  const subs = Object.entries(s?.subscriptions ?? {});
  const replication = Object.entries(s?.replication ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const names = subs.map(([n]) => n);
  const backlog = subs.reduce((sum, [, v]) => sum + (v.msgBacklog ?? 0), 0);
  const attached = subs.flatMap(([sub, v]) => (v.consumers ?? []).map((c) => ({ sub, c })));
  const partitions = s?.partitions && Object.keys(s.partitions).length > 0 ? Object.entries(s.partitions) : null;

  return h(Fragment, {},
    h('div', { class: 'crumbs' }, link('/tenants', 'Tenants'), ' / ', link(tenantHref(tenant), tenant), ' / ',
      link(namespaceHref(tenant, ns), ns), ' / ', topic),
    h('div', { class: 'title-row' }, h('h1', {}, topic), h('span', { class: 'badge' }, domain),
      h('span', { class: 'spacer' }),
      h('button', { class: 'small', disabled: unloading, onClick: () => busy(setUnloading, actionsNotice, async () => {
        await api.unload(domain, tenant, ns, topic);
        actionsNotice.ok('Unloaded: the topic is loaded again on next use.');
      }) }, 'Unload'),
      dangerButton('Delete topic', actionsNotice, async () => {
        await api.deleteTopic(domain, tenant, ns, topic, partitioned.current > 0);
        changed();
        navigate(namespaceHref(tenant, ns));
      }, { 'data-testid': 'delete-topic' })),
    h('p', { class: 'muted mono' }, full),
    actionsNotice.el, status.el,
    h('div', { class: 'cards' }, s ? [
      card('Rate in', fmtRate(s.msgRateIn, 'msg'), 'topic-rate-in'),
      card('Rate out', fmtRate(s.msgRateOut, 'msg'), 'topic-rate-out'),
      card('Throughput in', fmtBytes(s.msgThroughputIn) + '/s'),
      card('Throughput out', fmtBytes(s.msgThroughputOut) + '/s'),
      card('Messages in', fmtNumber(s.msgInCounter), 'topic-messages-in'),
      card('Backlog', `${fmtNumber(backlog)} msgs`, 'topic-backlog'),
      card('Storage', fmtBytes(s.storageSize), 'topic-storage'),
      card('Producers', String(s.publishers?.length ?? 0)),
      retention ? card('Retention', fmtRetention(retention), 'topic-retention') : null,
    ] : null),
    h('div', { class: 'charts' },
      h(LiveChart, { title: 'Messages per second', series: SERIES, format: fmtNumber, capacity: CHART_SAMPLES,
        testid: 'chart-topic-messages', values: rates.current, version: samples }),
      h(LiveChart, { title: 'Bytes per second', series: SERIES, format: fmtBytes, capacity: CHART_SAMPLES,
        testid: 'chart-topic-bytes', values: bytes.current, version: samples })),
    h('div', { 'data-testid': 'partitions' }, partitions ? [
      h('h2', {}, `Partitions (${partitions.length})`),
      table(['Partition', 'Rate in', 'Rate out', 'Backlog', 'Storage'], 1, partitions.map(([name, p]) => {
        const local = name.slice(name.lastIndexOf('/') + 1);
        const pb = Object.values(p.subscriptions ?? {}).reduce((sum, v) => sum + (v.msgBacklog ?? 0), 0);
        return h('tr', { key: name }, h('td', {}, link(topicPageHref(domain, tenant, ns, local), local)),
          num(fmtRate(p.msgRateIn, 'msg')), num(fmtRate(p.msgRateOut, 'msg')), num(fmtNumber(pb)),
          num(fmtBytes(p.storageSize)));
      })),
    ] : null),
    h('h2', {}, 'Producers'),
    h('div', { 'data-testid': 'producers' }, s === null ? null : (s.publishers ?? []).length === 0
      ? h('p', { class: 'empty-state' }, 'No producer is connected.')
      : table(['Producer', 'Protocol', 'Address', 'Rate in', 'Throughput in'], 3, s.publishers.map((p) =>
        h('tr', {}, h('td', {}, p.producerName), h('td', {}, protocolName(p.protocol)), h('td', {}, p.address || '—'),
          num(fmtRate(p.msgRateIn, 'msg')), num(fmtBytes(p.msgThroughputIn) + '/s'))))),
    replication.length === 0 ? null : h(Fragment, {},
      h('h2', {}, 'Replication'),
      h('div', { 'data-testid': 'replication' },
        table(['Cluster', 'Link', 'Backlog', 'Delay', 'Rate out', 'Rate in'], 2, replication.map(([cluster, r]) =>
          h('tr', { key: cluster, 'data-cluster': cluster }, h('td', {}, cluster),
            h('td', { 'data-testid': `replication-link-${cluster}` },
              r.connected ? 'connected' : 'down' + (r.lastError ? `: ${r.lastError}` : '')),
            num(fmtNumber(r.replicationBacklog), { 'data-testid': `replication-backlog-${cluster}` }),
            num(`${fmtNumber(r.replicationDelayInSeconds)} s`),
            num(fmtRate(r.msgRateOut, 'msg')), num(fmtRate(r.msgRateIn, 'msg'))))))),
    h('h2', {}, 'Subscriptions'),
    h('div', { 'data-testid': 'subscriptions' }, s === null ? null : subs.length === 0
      ? h('p', { class: 'empty-state' }, 'No subscriptions. Create one below, or attach a consumer.')
      : table(['Subscription', 'Type', 'Backlog', 'Rate out', 'Consumers', 'Unacked'], 2, subs.map(([name, v]) =>
        h('tr', { key: name, 'data-subscription': name },
          h('td', {}, name,
            v.isReplicated ? h('span', { class: 'muted', title: replicatedHint }, ' replicated') : null),
          h('td', {}, v.type ?? '—'),
          num(fmtNumber(v.msgBacklog), { 'data-testid': `backlog-${name}` }),
          num(fmtRate(v.msgRateOut, 'msg')), num(String(v.consumers?.length ?? 0)),
          num(fmtNumber(v.unackedMessages ?? 0)))))),
    h('h2', {}, 'Consumers'),
    h('div', { 'data-testid': 'consumers' }, s === null ? null : attached.length === 0
      ? h('p', { class: 'empty-state' }, 'No consumer is connected.')
      : table(['Consumer', 'Subscription', 'Protocol', 'Address', 'Rate out', 'Throughput out', 'Permits', 'Unacked'],
        4, attached.map(({ sub, c }) => h('tr', { 'data-consumer': c.consumerName },
          h('td', {}, c.consumerName || '—'), h('td', {}, sub),
          h('td', {}, protocolName(c.protocol)), h('td', {}, c.address || '—'),
          num(fmtRate(c.msgRateOut, 'msg')), num(fmtBytes(c.msgThroughputOut) + '/s'),
          num(fmtNumber(c.availablePermits ?? 0)), num(fmtNumber(c.unackedMessages ?? 0)))))),
    h(SubscriptionActions, { where, subscriptions: names, refresh }),
    h('h2', {}, 'Messages'),
    h('p', { class: 'muted' }, partitions ? 'A partitioned topic: produce, peek and subscription actions work on its ' +
      'partitions, listed above.' : null),
    h(ProduceForm, { where, refresh }),
    h(MessageBrowser, { ...where, subscriptions: names }),
    h('h2', {}, 'Trace'),
    h(TraceView, where));
}
