// The message browser: peeks the first unacknowledged messages of a
// subscription (GET .../subscription/{sub}/position/{n}) without consuming
// them, and shows each payload as JSON, text or hex, up to a size cap.
import { api, Domain, PeekedMessage } from '../api';
import { busy, h, notice, replace } from '../dom';

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

// `selects` receives the browser's subscription picker, which the topic page
// keeps filled with the topic's subscriptions.
export function messageBrowser(domain: Domain, tenant: string, ns: string, topic: string,
  selects: HTMLSelectElement[]): HTMLElement {
  const n = notice();
  const select = h('select', { name: 'peekSubscription', 'aria-label': 'Subscription to peek' },
    h('option', { value: '' }, '(no subscriptions)'));
  selects.push(select);
  const count = h('input', { type: 'number', name: 'peekCount', min: 1, max: MAX_MESSAGES, value: 10,
    'aria-label': 'How many messages' });
  const list = h('div', { class: 'messages', 'data-testid': 'messages' },
    h('p', { class: 'empty-state' }, 'Choose a subscription and peek at its next messages; nothing is acknowledged.'));
  const peek = h('button', { type: 'submit' }, 'Peek');
  const form = h('form', { class: 'inline-form', 'data-testid': 'peek-form' }, select,
    h('label', { class: 'field-inline' }, 'first ', count, ' unacknowledged'), peek, n.el);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(peek, n, async () => {
      if (!select.value) throw new Error('This topic has no subscription to peek from. Create one first.');
      const wanted = Math.min(MAX_MESSAGES, Math.max(1, Number(count.value) || 1));
      const found: Node[] = [];
      for (let i = 1; i <= wanted; i++) {
        const m = await api.peek(domain, tenant, ns, topic, select.value, i);
        if (!m) break;
        found.push(messageCard(i, m));
      }
      replace(list, found.length ? found : h('p', { class: 'empty-state' },
        `${select.value} has no unacknowledged messages.`));
    });
  });
  return h('div', { class: 'panel' }, form, list);
}
