// The message browser: peeks the first unacknowledged messages of a
// subscription (GET .../subscription/{sub}/position/{n}) without consuming
// them, or shows one message by its id (GET .../ledger/{l}/entry/{e}), and
// shows each payload as JSON, text or hex, up to a size cap.
import { ComponentChildren, h } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { api, Domain, PeekedMessage } from '../api';
import { busy, useNotice } from '../dom';

const MAX_SHOWN_BYTES = 16 * 1024;
const MAX_MESSAGES = 100;

export type PayloadView = 'json' | 'text' | 'hex';

export function classify(payload: Uint8Array): { view: PayloadView; text: string } {
  const shown = payload.subarray(0, MAX_SHOWN_BYTES);
  let text: string | null = null;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(shown);
  } catch {
    text = null;
  }
  // eslint-disable-next-line no-control-regex
  if (text !== null && !/[\u0000-\u0008\u000e-\u001f]/.test(text)) {
    if (payload.length <= MAX_SHOWN_BYTES) {
      try {
        return { view: 'json', text: JSON.stringify(JSON.parse(text), null, 2) };
      } catch {
        // not JSON
      }
    }
    return { view: 'text', text };
  }
  return { view: 'hex', text: hexdump(shown) };
}

function hexdump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.subarray(i, i + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join('\n');
}

function messageCard(index: number, m: PeekedMessage) {
  const { view, text } = classify(m.payload);
  const props = Object.entries(m.properties);
  return h('article', { class: 'message', 'data-testid': 'message' },
    h('header', {},
      h('b', {}, `#${index}`), ' ', h('span', { class: 'mono', 'data-testid': 'message-id' }, m.messageId),
      h('span', { class: 'badge' }, view), m.batchSize ? h('span', { class: 'badge' }, `batch of ${m.batchSize}`) : null),
    h('dl', {},
      h('dt', {}, 'Published'), h('dd', {}, m.publishTime || '—'),
      h('dt', {}, 'Producer'), h('dd', {}, m.producerName || '—'),
      h('dt', {}, 'Key'), h('dd', {}, m.key ?? '—'),
      h('dt', {}, 'Properties'), h('dd', {}, props.length ? props.map(([k, v]) => `${k}=${v}`).join(', ') : '—'),
      h('dt', {}, 'Size'), h('dd', {}, `${m.payload.length} bytes`)),
    h('pre', { class: 'payload', 'data-testid': 'message-payload' }, text),
    m.payload.length > MAX_SHOWN_BYTES ? h('p', { class: 'muted' },
      `Showing the first ${MAX_SHOWN_BYTES} of ${m.payload.length} bytes.`) : null);
}

// `subscriptions` are the topic's subscriptions, which the topic page keeps
// up to date.
export function MessageBrowser({ domain, tenant, ns, topic, subscriptions }: {
  domain: Domain; tenant: string; ns: string; topic: string; subscriptions: string[];
}) {
  const n = useNotice();
  const [running, setRunning] = useState(false);
  const [found, setFound] = useState<ComponentChildren>(h('p', { class: 'empty-state' },
    'Choose a subscription and peek at its next messages; nothing is acknowledged.'));
  const select = useRef<HTMLSelectElement>(null);
  const count = useRef<HTMLInputElement>(null);
  const messageId = useRef<HTMLInputElement>(null);
  const lookup = (e: Event) => {
    e.preventDefault();
    busy(setRunning, n, async () => {
      const text = messageId.current!.value.trim();
      // "ledger:entry", as ids are shown, with an optional ":batch index".
      const m = /^(\d+):(\d+)(:-?\d+)?$/.exec(text);
      if (!m) throw new Error(`"${text}" is not a message id such as 12:34`);
      const found = await api.messageById(domain, tenant, ns, topic, Number(m[1]), Number(m[2]));
      setFound(found ? messageCard(1, found) : h('p', { class: 'empty-state' }, `No message ${m[1]}:${m[2]} in ${topic}.`));
    });
  };
  const submit = (e: Event) => {
    e.preventDefault();
    busy(setRunning, n, async () => {
      const sub = select.current!.value;
      if (!sub) throw new Error('This topic has no subscription to peek from. Create one first.');
      const wanted = Math.min(MAX_MESSAGES, Math.max(1, Number(count.current!.value) || 1));
      const cards: ComponentChildren[] = [];
      for (let i = 1; i <= wanted; i++) {
        const m = await api.peek(domain, tenant, ns, topic, sub, i);
        if (!m) break;
        cards.push(messageCard(i, m));
      }
      setFound(cards.length ? cards : h('p', { class: 'empty-state' }, `${sub} has no unacknowledged messages.`));
    });
  };
  return h('div', { class: 'panel' },
    h('form', { class: 'inline-form', 'data-testid': 'peek-form', onSubmit: submit },
      h('select', { ref: select, name: 'peekSubscription', 'aria-label': 'Subscription to peek' },
        subscriptionOptions(subscriptions)),
      h('label', { class: 'field-inline' }, 'first ', h('input', { ref: count, type: 'number', name: 'peekCount',
        min: 1, max: MAX_MESSAGES, defaultValue: '10', 'aria-label': 'How many messages' }), ' unacknowledged'),
      h('button', { type: 'submit', disabled: running }, 'Peek'), n.el),
    h('form', { class: 'inline-form', 'data-testid': 'message-id-form', onSubmit: lookup },
      h('label', { class: 'field-inline' }, 'or the message ', h('input', { ref: messageId, type: 'text',
        name: 'messageId', placeholder: 'ledger:entry', 'aria-label': 'Message id' })),
      h('button', { type: 'submit', disabled: running }, 'Show')),
    h('div', { class: 'messages', 'data-testid': 'messages' }, found));
}

// The options of a subscription picker: the subscriptions, or a placeholder.
export function subscriptionOptions(names: string[]): ComponentChildren {
  return names.length === 0 ? h('option', { value: '' }, '(no subscriptions)')
    : names.map((name) => h('option', { key: name, value: name }, name));
}
