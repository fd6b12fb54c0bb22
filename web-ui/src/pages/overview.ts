// Overview: the node, counts, live message and byte rates, storage and the
// largest backlogs. GET /admin/v2/overview is sampled every few seconds while
// the console is open, on any page, so that the charts show the recent past
// as soon as the overview opens.
import { api, Overview } from '../api';
import { LiveChart } from '../chart';
import { card, every, fmtBytes, fmtDuration, fmtNumber, h, link, notice, REFRESH_MS, replace } from '../dom';
import { topicHref } from './links';

const CHART_SAMPLES = 60;
const messageHistory: number[][] = [[], []];
const byteHistory: number[][] = [[], []];
let latest: Overview | null = null;
let lastError: unknown = null;
let onSample: (() => void) | null = null;  // the overview page, while shown

function record(history: number[][], sample: number[]) {
  sample.forEach((v, i) => {
    history[i].push(Number.isFinite(v) ? v : 0);
    if (history[i].length > CHART_SAMPLES) history[i].shift();
  });
}

// Starts the sampling; main.ts calls it once.
export function sampleOverview() {
  every(REFRESH_MS, async () => {
    try {
      latest = await api.overview();
      lastError = null;
      record(messageHistory, [latest.msgRateIn, latest.msgRateOut]);
      record(byteHistory, [latest.msgThroughputIn, latest.msgThroughputOut]);
    } catch (e) {
      lastError = e;
    }
    onSample?.();
  });
}

export function overviewPage(root: HTMLElement) {
  document.title = 'Overview · Magnetar';
  const status = notice();
  const cards = h('div', { class: 'cards' });
  const msgChart = new LiveChart('Messages per second',
    [{ label: 'in', color: '#6d4aff' }, { label: 'out', color: '#13a10e' }], fmtNumber, CHART_SAMPLES, 'chart-messages', messageHistory);
  const byteChart = new LiveChart('Bytes per second',
    [{ label: 'in', color: '#6d4aff' }, { label: 'out', color: '#13a10e' }], fmtBytes, CHART_SAMPLES, 'chart-bytes', byteHistory);
  const backlogs = h('div', { 'data-testid': 'largest-backlogs' });
  const node = h('p', { class: 'muted', 'data-testid': 'overview-node' }, 'Connecting…');
  root.append(
    h('h1', {}, 'Overview'),
    node,
    status.el,
    cards,
    h('div', { class: 'charts' }, msgChart.el, byteChart.el),
    h('h2', {}, 'Largest backlogs'),
    backlogs,
  );

  // Kept across refreshes so that a failed one shows the node as unreachable.
  const health = card('Status', '…', 'overview-status');
  const setHealth = (ok: boolean) => {
    const value = health.querySelector('.card-value')!;
    value.textContent = ok ? 'Healthy' : 'Unreachable';
    value.className = ok ? 'card-value good' : 'card-value bad';
  };

  const show = (o: Overview) => {
    replace(node, `Magnetar ${o.version} · cluster ${o.cluster} · up ${fmtDuration(o.uptimeSeconds)}`);
    replace(cards,
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
    );
    msgChart.redraw();
    byteChart.redraw();
    if (o.largestBacklogs.length === 0) {
      replace(backlogs, h('p', { class: 'empty-state' }, 'No subscription has a backlog. Consumers are keeping up.'));
    } else {
      replace(backlogs, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Topic'), h('th', { class: 'num' }, 'Backlog (msgs)'),
          h('th', { class: 'num' }, 'Storage'))),
        h('tbody', {}, o.largestBacklogs.map((b) => h('tr', {},
          h('td', {}, topicLink(b.topic)), h('td', { class: 'num' }, fmtNumber(b.msgBacklog)),
          h('td', { class: 'num' }, fmtBytes(b.storageSize)))))));
    }
  };

  const update = () => {
    if (lastError === null && latest !== null) {
      show(latest);
      setHealth(true);
      status.clear();
    } else if (lastError !== null) {
      setHealth(false);
      if (!health.isConnected) cards.append(health);
      status.error(lastError);
    }
  };
  onSample = update;
  update();
  return () => {
    if (onSample === update) onSample = null;
  };
}

function topicLink(full: string): Node | string {
  const href = topicHref(full);
  return href ? link(href, full) : full;
}
