// Overview: the node, counts, live message and byte rates, storage and the
// largest backlogs. GET /admin/v2/overview is sampled every few seconds while
// the console is open, on any page, so that the charts show the recent past
// as soon as the overview opens.
import { ComponentChildren, Fragment, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, isSuperuser, Overview } from '../api';
import { LiveChart, record } from '../chart';
import { card, every, fmtBytes, fmtDuration, fmtNumber, link, REFRESH_MS, useNotice } from '../dom';
import { topicHref } from './links';

const CHART_SAMPLES = 60;
const SERIES = [{ label: 'in', color: '#6d4aff' }, { label: 'out', color: '#13a10e' }];
const messageHistory: number[][] = [[], []];
const byteHistory: number[][] = [[], []];
let latest: Overview | null = null;
let lastError: unknown = null;
let samples = 0;
let onSample: (() => void) | null = null;  // the overview page, while shown

// Starts the sampling; main.ts calls it once.
export function sampleOverview() {
  every(REFRESH_MS, async () => {
    if (!isSuperuser()) return;  // the node-wide overview is for superusers
    try {
      latest = await api.overview();
      lastError = null;
      record(messageHistory, [latest.msgRateIn, latest.msgRateOut], CHART_SAMPLES);
      record(byteHistory, [latest.msgThroughputIn, latest.msgThroughputOut], CHART_SAMPLES);
    } catch (e) {
      lastError = e;
    }
    samples++;
    onSample?.();
  });
}

function topicLink(full: string): ComponentChildren {
  const href = topicHref(full);
  return href ? link(href, full) : full;
}

export function OverviewPage() {
  const status = useNotice();
  const [version, setVersion] = useState(samples);

  useEffect(() => {
    document.title = 'Overview · Magnetar';
    const update = () => setVersion(samples);
    onSample = update;
    return () => {
      if (onSample === update) onSample = null;
    };
  }, []);
  useEffect(() => {
    if (lastError !== null) status.error(lastError);
    else status.clear();
  }, [version]);

  const o = latest;
  // A failed refresh shows the node as unreachable, next to the last counts.
  const healthy = lastError === null && o !== null;
  const health = o === null && lastError === null ? card('Status', '…', 'overview-status')
    : card('Status', healthy ? 'Healthy' : 'Unreachable', 'overview-status', healthy ? 'good' : 'bad');

  let cards: ComponentChildren = lastError !== null ? [health] : null;
  let backlogs: ComponentChildren = null;
  if (o !== null) {
    cards = [
      health,
      card('Tenants', fmtNumber(o.tenants), 'overview-tenants'),
      card('Namespaces', fmtNumber(o.namespaces), 'overview-namespaces'),
      card('Topics', fmtNumber(o.topics), 'overview-topics'),
      card('Loaded topics', fmtNumber(o.loadedTopics)),
      card('Producers', fmtNumber(o.producers), 'overview-producers'),
      card('Consumers', fmtNumber(o.consumers), 'overview-consumers'),
      card('Subscriptions', fmtNumber(o.subscriptions)),
      card('Backlog', `${fmtNumber(o.msgBacklog)} msgs`, 'overview-backlog'),
      card('Storage', fmtBytes(o.storageSize), 'overview-storage'),
      card('Messages in', fmtNumber(o.msgInCounter), 'overview-messages-in'),
      card('Messages out', fmtNumber(o.msgOutCounter)),
    ];
    backlogs = o.largestBacklogs.length === 0
      ? h('p', { class: 'empty-state' }, 'No subscription has a backlog. Consumers are keeping up.')
      : h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Topic'), h('th', { class: 'num' }, 'Backlog (msgs)'),
          h('th', { class: 'num' }, 'Storage'))),
        h('tbody', {}, o.largestBacklogs.map((b) => h('tr', {},
          h('td', {}, topicLink(b.topic)), h('td', { class: 'num' }, fmtNumber(b.msgBacklog)),
          h('td', { class: 'num' }, fmtBytes(b.storageSize))))));
  }

  return h(Fragment, {},
    h('h1', {}, 'Overview'),
    h('p', { class: 'muted', 'data-testid': 'overview-node' },
      o ? `Magnetar ${o.version} · cluster ${o.cluster} · up ${fmtDuration(o.uptimeSeconds)}` : 'Connecting…'),
    status.el,
    h('div', { class: 'cards' }, cards),
    h('div', { class: 'charts' },
      h(LiveChart, { title: 'Messages per second', series: SERIES, format: fmtNumber, capacity: CHART_SAMPLES,
        testid: 'chart-messages', values: messageHistory, version }),
      h(LiveChart, { title: 'Bytes per second', series: SERIES, format: fmtBytes, capacity: CHART_SAMPLES,
        testid: 'chart-bytes', values: byteHistory, version })),
    h('h2', {}, 'Largest backlogs'),
    h('div', { 'data-testid': 'largest-backlogs' }, backlogs));
}
