// The sidebar: tenants -> namespaces -> topics as a tree, loaded level by
// level when a branch opens, following the page shown and refreshed when
// the console creates or deletes something (dom.ts: changed()).
import { ComponentChildren, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from './api';
import { link } from './dom';
import { namespaceHref, parseTopic, tenantHref, topicPageHref } from './pages/links';

// Topics listed under one namespace; the namespace page has them all.
const MAX_TOPICS = 100;

const open = new Set<string>();  // "t" and "t/ns" of the open branches

interface TreeProps {
  path: string;       // the page shown: its link is marked
  generation: number; // changes when the console created or deleted something
}

function treeLink(href: string, label: string, path: string, attrs: Record<string, string> = {}) {
  const extra = attrs.class ? ` ${attrs.class}` : '';
  return link(href, label, { ...attrs, class: `tree-link${extra}${href === path ? ' current' : ''}` });
}

function Branch<T>({ id, label, href, depth, path, generation, load, show }: TreeProps & {
  id: string; label: string; href: string; depth: number;
  load: () => Promise<T>;
  show: (data: T) => ComponentChildren[];
}) {
  const [, setToggles] = useState(0);
  const [data, setData] = useState<{ value: T } | 'failed' | null>(null);
  // Open when the user opened it or the page shown is below it (Sidebar).
  const isOpen = open.has(id);

  useEffect(() => {
    if (!isOpen) return;
    let live = true;
    load().then((value) => live && setData({ value }), () => live && setData('failed'));
    return () => {
      live = false;
    };
  }, [isOpen, generation]);

  const toggle = () => {
    if (isOpen) {
      open.delete(id);
      setData(null);
    } else {
      open.add(id);
    }
    setToggles((n) => n + 1);
  };
  let list: ComponentChildren = null;
  if (!isOpen || data === null) list = null;
  else if (data === 'failed') list = h('li', { class: 'tree-empty' }, 'unavailable');
  else {
    const nodes = show(data.value);
    list = nodes.length ? nodes : h('li', { class: 'tree-empty' }, 'empty');
  }
  return h('li', { class: `tree-item depth-${depth}` },
    h('div', { class: 'tree-row' },
      h('button', { class: 'tree-toggle', type: 'button', 'aria-label': `Expand ${label}`,
        'aria-expanded': isOpen ? 'true' : 'false', onClick: toggle }, isOpen ? '▾' : '▸'),
      treeLink(href, label, path, { 'data-tree-key': id })),
    h('ul', { class: 'tree-children' }, list));
}

async function topicNames(tenant: string, ns: string): Promise<string[]> {
  const names = new Set<string>();
  for (const full of await api.topics(tenant, ns)) names.add(full.replace(/-partition-\d+$/, ''));
  return [...names].sort();
}

function topicItems(tenant: string, ns: string, sorted: string[], path: string): ComponentChildren[] {
  const shown: ComponentChildren[] = [];
  for (const full of sorted.slice(0, MAX_TOPICS)) {
    const p = parseTopic(full);
    if (!p) continue;
    const label = p.domain === 'persistent' ? p.topic : `${p.topic} (non-persistent)`;
    shown.push(h('li', { class: 'tree-item depth-2', key: full }, h('div', { class: 'tree-row' },
      h('span', { class: 'tree-leaf' }), treeLink(topicPageHref(p.domain, tenant, ns, p.topic), label, path))));
  }
  if (sorted.length > MAX_TOPICS) {
    shown.push(h('li', { class: 'tree-item depth-2', key: '…' }, treeLink(namespaceHref(tenant, ns),
      `… all ${sorted.length.toLocaleString('en-US')} topics`, path, { class: 'muted' })));
  }
  return shown;
}

function namespaceItems(tenant: string, names: string[], props: TreeProps): ComponentChildren[] {
  return names.map((full) => {
    const ns = full.slice(full.indexOf('/') + 1);
    return h(Branch<string[]>, {
      key: ns, id: `${tenant}/${ns}`, label: ns, href: namespaceHref(tenant, ns), depth: 1, ...props,
      load: () => topicNames(tenant, ns),
      show: (sorted: string[]) => topicItems(tenant, ns, sorted, props.path),
    });
  });
}

export function Sidebar({ path }: { path: string }) {
  const [tenants, setTenants] = useState<string[] | null | 'failed'>(null);
  const [generation, setGeneration] = useState(0);

  // Opens the branches above the page shown.
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'tenants' && parts[1]) {
    open.add(parts[1]);
    if (parts[2]) open.add(`${parts[1]}/${parts[2]}`);
  }

  useEffect(() => {
    const reload = () => setGeneration((g) => g + 1);
    window.addEventListener('magnetar:changed', reload);
    return () => window.removeEventListener('magnetar:changed', reload);
  }, []);
  useEffect(() => {
    let live = true;
    api.tenants().then((t) => live && setTenants(t), () => live && setTenants('failed'));
    return () => {
      live = false;
    };
  }, [generation]);

  let items: ComponentChildren;
  if (tenants === 'failed') items = h('li', { class: 'tree-empty' }, 'The node cannot be reached.');
  else if (tenants === null) items = null;
  else {
    items = tenants.map((t) => h(Branch<string[]>, {
      key: t, id: t, label: t, href: tenantHref(t), depth: 0, path, generation,
      load: () => api.namespaces(t),
      show: (names: string[]) => namespaceItems(t, names, { path, generation }),
    }));
  }
  return h('aside', { class: 'sidebar', 'aria-label': 'Tenants, namespaces and topics' },
    h('div', { class: 'sidebar-title' }, 'Browse'), h('ul', { class: 'tree' }, items));
}
