// What every page shares: formatters, polling, navigation, and the small
// Preact components every page uses (links, cards, notices, confirm buttons,
// inline forms).
import { ComponentChildren, h, VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

// Attributes passed through to an element (data-testid, aria-*, type, ...).
export type Attrs = Record<string, string | number | boolean | undefined | null>;

export function link(href: string, text: ComponentChildren, attrs: Attrs = {}) {
  return h('a', { href, 'data-link': '', ...attrs }, text);
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.message} (HTTP ${e.status})` : e.message;
  return e instanceof Error ? e.message : String(e);
}

interface NoticeState {
  kind: '' | 'error' | 'ok';
  text: string;
}

// A message area for one form or page: show an error, a success, or nothing.
export interface Notice {
  el: VNode;
  error(e: unknown): void;
  ok(text: string): void;
  clear(): void;
}

export function useNotice(): Notice {
  const [state, setState] = useState<NoticeState>({ kind: '', text: '' });
  return {
    el: h('div', { class: state.kind ? `notice ${state.kind}` : 'notice', role: state.kind === 'error' ? 'alert' : 'status' },
      state.text),
    error: (e: unknown) => setState({ kind: 'error', text: errorText(e) }),
    ok: (text: string) => setState({ kind: 'ok', text }),
    clear: () => setState((s) => (s.kind ? { kind: '', text: '' } : s)),
  };
}

// Runs `action` with `setBusy` true; reports its failure in `n`.
export async function busy(setBusy: (b: boolean) => void, n: Notice, action: () => Promise<void>) {
  setBusy(true);
  n.clear();
  try {
    await action();
  } catch (e) {
    n.error(e);
  } finally {
    setBusy(false);
  }
}

// A button that is disabled while its action runs; the failure lands in `n`.
export function ActionButton({ label, n, action, attrs }:
  { label: string; n: Notice; action: () => Promise<void>; attrs?: Attrs }) {
  const [running, setRunning] = useState(false);
  return h('button', { class: 'small', type: 'button', ...attrs, disabled: running,
    onClick: () => busy(setRunning, n, action) }, label);
}

export function card(label: string, value: string, testid?: string, valueClass = '') {
  return h('div', { class: 'card' }, h('div', { class: 'card-label' }, label),
    h('div', { class: valueClass ? `card-value ${valueClass}` : 'card-value', 'data-testid': testid }, value));
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
export function DangerButton({ label, n, action, attrs }:
  { label: string; n: Notice; action: () => Promise<void>; attrs?: Attrs }) {
  const [armed, setArmed] = useState(false);
  const [running, setRunning] = useState(false);
  const timer = useRef<number | undefined>(undefined);
  useEffect(() => () => window.clearTimeout(timer.current), []);
  const click = () => {
    if (!armed) {
      setArmed(true);
      timer.current = window.setTimeout(() => setArmed(false), 4000);
      return;
    }
    window.clearTimeout(timer.current);
    setArmed(false);
    busy(setRunning, n, action);
  };
  return h('button', { class: 'danger small', ...attrs, disabled: running, onClick: click },
    armed ? `Confirm ${label.toLowerCase()}?` : label);
}

export function dangerButton(label: string, n: Notice, action: () => Promise<void>, attrs: Attrs = {}) {
  return h(DangerButton, { label, n, action, attrs });
}

// An inline form: the given fields and a submit button; `submit` runs with
// the button disabled and its error lands in the form's notice.
export function InlineForm({ submitLabel, submit, testid, extraClass, children }: {
  submitLabel: string; submit: (n: Notice) => Promise<void>; testid?: string; extraClass?: string;
  children?: ComponentChildren;
}) {
  const n = useNotice();
  const [running, setRunning] = useState(false);
  return h('form', { class: extraClass ? `inline-form ${extraClass}` : 'inline-form', 'data-testid': testid,
    onSubmit: (e: Event) => {
      e.preventDefault();
      busy(setRunning, n, () => submit(n));
    } }, children, h('button', { type: 'submit', disabled: running }, submitLabel), n.el);
}

export function inlineForm(fields: ComponentChildren[], submitLabel: string, submit: (n: Notice) => Promise<void>,
  testid?: string, extraClass?: string) {
  return h(InlineForm, { submitLabel, submit, testid, extraClass }, ...fields);
}

// Runs `tick` every `ms` while the component is shown.
export function usePoll(ms: number, tick: () => Promise<void>) {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => every(ms, () => latest.current()), [ms]);
}

// Tells the sidebar that tenants, namespaces or topics were created or deleted.
export function changed() {
  window.dispatchEvent(new Event('magnetar:changed'));
}
