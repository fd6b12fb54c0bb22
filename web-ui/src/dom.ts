// Building DOM without a framework: h() for elements, formatters, and the
// small pieces every page shares (cards, notices, confirm buttons).
import { ApiError } from './api';

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined | null>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'value' && 'value' in el) (el as HTMLInputElement).value = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el: Element, children: (Child | Child[])[]) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function replace(el: Element, ...children: (Child | Child[])[]) {
  el.replaceChildren();
  append(el, children);
}

export function link(href: string, text: string, attrs: Attrs = {}) {
  return h('a', { href, 'data-link': true, ...attrs }, text);
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.message} (HTTP ${e.status})` : e.message;
  return e instanceof Error ? e.message : String(e);
}

// A message area for one form or page: show an error, a success, or nothing.
export function notice() {
  const el = h('div', { class: 'notice', role: 'status' });
  return {
    el,
    error(e: unknown) {
      el.className = 'notice error';
      el.setAttribute('role', 'alert');
      el.textContent = errorText(e);
    },
    ok(text: string) {
      el.className = 'notice ok';
      el.setAttribute('role', 'status');
      el.textContent = text;
    },
    clear() {
      el.className = 'notice';
      el.textContent = '';
    },
  };
}

// Runs `action` with the button disabled; reports its failure in `n`.
export async function busy(button: HTMLButtonElement, n: ReturnType<typeof notice>, action: () => Promise<void>) {
  button.disabled = true;
  n.clear();
  try {
    await action();
  } catch (e) {
    n.error(e);
  } finally {
    button.disabled = false;
  }
}

export function card(label: string, value: string, testid?: string) {
  return h('div', { class: 'card' }, h('div', { class: 'card-label' }, label),
    h('div', { class: 'card-value', 'data-testid': testid }, value));
}

export function fmtNumber(n: number | undefined | null): string {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  if (Math.abs(n) >= 100 || Number.isInteger(n)) return Math.round(n).toLocaleString('en-US');
  return n.toFixed(Math.abs(n) >= 10 ? 1 : 2);
}

export function fmtBytes(n: number | undefined | null): string {
  if (n === undefined || n === null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? (Number.isInteger(v) ? v : v.toFixed(1)) : v.toFixed(1)} ${units[i]}`;
}

export function fmtRate(n: number | undefined, unit: string): string {
  return `${fmtNumber(n ?? 0)} ${unit}/s`;
}

export function fmtDuration(seconds: number): string {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${hh}h`;
  if (hh > 0) return `${hh}h ${mm}m`;
  if (mm > 0) return `${mm}m ${s % 60}s`;
  return `${s % 60}s`;
}

// Pulsar's naming rule for tenants, namespaces and topics, checked before a
// request only to guide the user; the server's answer is what counts.
export const NAME_HINT = 'letters, digits, - _ = : .';

// Client-side navigation: the shell (main.ts) renders on popstate.
export function navigate(href: string) {
  history.pushState(null, '', href);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

// Calls `tick` now and then every `ms` until the returned stop function runs;
// a tick never overlaps the previous one.
export function every(ms: number, tick: () => Promise<void>): () => void {
  let stopped = false;
  let timer: number | undefined;
  const run = async () => {
    if (stopped) return;
    try {
      await tick();
    } finally {
      if (!stopped) timer = window.setTimeout(run, ms);
    }
  };
  run();
  return () => {
    stopped = true;
    if (timer !== undefined) window.clearTimeout(timer);
  };
}

// Seconds between live refreshes of stats.
export const REFRESH_MS = 2000;

// A button that asks once more before a destructive action: the first click
// arms it ("Confirm …?"), the second within a few seconds runs `action`.
export function dangerButton(label: string, n: ReturnType<typeof notice>, action: () => Promise<void>,
  attrs: Attrs = {}) {
  const button = h('button', { class: 'danger small', ...attrs }, label);
  let armed: number | undefined;
  button.addEventListener('click', () => {
    if (armed === undefined) {
      button.textContent = `Confirm ${label.toLowerCase()}?`;
      armed = window.setTimeout(() => {
        armed = undefined;
        button.textContent = label;
      }, 4000);
      return;
    }
    window.clearTimeout(armed);
    armed = undefined;
    button.textContent = label;
    busy(button, n, action);
  });
  return button;
}

// An inline form: the given fields and a submit button; `submit` runs with
// the button disabled and its error lands in the form's notice.
export function inlineForm(fields: (Node | string)[], submitLabel: string,
  submit: (n: ReturnType<typeof notice>) => Promise<void>, testid?: string) {
  const n = notice();
  const button = h('button', { type: 'submit' }, submitLabel);
  const form = h('form', { class: 'inline-form', 'data-testid': testid }, ...fields, button, n.el);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(button, n, () => submit(n));
  });
  return form;
}

// Tells the sidebar that tenants, namespaces or topics were created or deleted.
export function changed() {
  window.dispatchEvent(new Event('magnetar:changed'));
}
