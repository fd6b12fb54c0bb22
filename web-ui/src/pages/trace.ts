// Message tracing on the topic page: looks a message up by key, message id
// or property (GET .../{topic}/trace, docs/tracing.md) and shows each
// matching message's stages as a timeline, each with its latency from
// receipt drawn as a bar, the way tracing tools show spans.
import { ComponentChildren, h } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { api, Domain, MessageTrace, TraceStage } from '../api';
import { busy, useNotice } from '../dom';

type By = 'key' | 'messageId' | 'property';

// "subscription billing, consumer c1 (pulsar 127.0.0.1:5000)" from the parts a stage has.
function who(s: TraceStage): string {
  const parts: string[] = [];
  if (s.producer) parts.push(`producer ${s.producer}`);
  if (s.subscription) parts.push(`subscription ${s.subscription}`);
  if (s.consumer) parts.push(`consumer ${s.consumer}`);
  const client = [s.protocol, s.clientAddress].filter(Boolean).join(' ');
  if (client) parts.push(`(${client})`);
  if (s.after) parts.push(`[after ${s.after} through ${s.through}]`);
  if (s.redeliveryCount) parts.push(`redelivery ${s.redeliveryCount}`);
  if (s.detail) parts.push(s.detail);
  return parts.join(' ');
}

function timeline(m: MessageTrace) {
  const longest = Math.max(1, ...m.stages.map((s) => s.latencyMs));
  const keys = m.messages.map((x) => x.key).filter(Boolean).join(', ');
  const props = m.messages.flatMap((x) => Object.entries(x.properties)).map(([k, v]) => `${k}=${v}`).join(', ');
  return h('article', { class: 'message trace', 'data-testid': 'trace' },
    h('header', {},
      h('span', { class: 'mono', 'data-testid': 'trace-message-id' }, m.messageId),
      m.batchIndex !== undefined ? h('span', { class: 'badge' }, `batch index ${m.batchIndex}`) : null),
    h('dl', {},
      h('dt', {}, 'Received'), h('dd', {}, m.receivedAt),
      h('dt', {}, 'Producer'), h('dd', {}, m.producer || '—'),
      h('dt', {}, 'Key'), h('dd', {}, keys || '—'),
      h('dt', {}, 'Properties'), h('dd', {}, props || '—'),
      h('dt', {}, 'traceparent'), h('dd', { class: 'mono' }, m.traceparent ?? '—')),
    h('table', { class: 'timeline' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Stage'), h('th', {}, 'Time'), h('th', { class: 'num' }, 'Latency'),
        h('th', {}, ''), h('th', {}, 'Where'))),
      h('tbody', {}, m.stages.map((s, i) => h('tr', { key: i, 'data-stage': s.stage },
        h('td', {}, h('b', {}, s.stage)),
        h('td', { class: 'mono' }, s.isoTime),
        h('td', { class: 'num' }, `+${s.latencyMs} ms`),
        h('td', { class: 'bar-cell' }, h('span', { class: 'bar', style: { width: `${(100 * s.latencyMs) / longest}%` } })),
        h('td', {}, who(s)))))));
}

export function TraceView({ domain, tenant, ns, topic }: { domain: Domain; tenant: string; ns: string; topic: string }) {
  const n = useNotice();
  const [running, setRunning] = useState(false);
  const [found, setFound] = useState<ComponentChildren>(h('p', { class: 'empty-state' },
    'Find a message by key, id or property to see where it went. Its namespace needs tracing on ' +
    '(magnetar admin namespaces set-tracing).'));
  const by = useRef<HTMLSelectElement>(null);
  const value = useRef<HTMLInputElement>(null);
  const submit = (e: Event) => {
    e.preventDefault();
    busy(setRunning, n, async () => {
      const text = value.current!.value.trim();
      if (!text) throw new Error('Give a key, a message id (ledger:entry) or a property (name=value).');
      const answer = await api.trace(domain, tenant, ns, topic, by.current!.value as By, text);
      setFound(answer.messages.map(timeline));
    });
  };
  return h('div', { class: 'panel' },
    h('form', { class: 'inline-form', 'data-testid': 'trace-form', onSubmit: submit },
      h('select', { ref: by, name: 'traceBy', 'aria-label': 'Trace by' },
        h('option', { value: 'key' }, 'key'),
        h('option', { value: 'messageId' }, 'message id'),
        h('option', { value: 'property' }, 'property (name=value)')),
      h('input', { ref: value, type: 'text', name: 'traceValue', 'aria-label': 'Trace value',
        placeholder: 'user-7, 12:34 or order-id=1234' }),
      h('button', { type: 'submit', disabled: running }, 'Trace'), n.el),
    h('div', { class: 'messages', 'data-testid': 'traces' }, found));
}
