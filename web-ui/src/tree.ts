// The sidebar: tenants -> namespaces -> topics as a tree, loaded level by
// level when a branch opens, following the page shown and refreshed when
// the console creates or deletes something (dom.ts: changed()).
import { api } from './api';
import { h, link, replace } from './dom';
import { namespaceHref, parseTopic, tenantHref, topicPageHref } from './pages/links';

// Topics listed under one namespace; the namespace page has them all.
const MAX_TOPICS = 100;

const open = new Set<string>();  // "t" and "t/ns" of the open branches

function toggle(key: string, label: string, href: string, children: () => Promise<Node[]>, depth: number) {
  const list = h('ul', { class: 'tree-children' });
  const button = h('button', { class: 'tree-toggle', type: 'button', 'aria-label': `Expand ${label}`,
    'aria-expanded': 'false' }, '▸');
  const item = h('li', { class: `tree-item depth-${depth}` },
    h('div', { class: 'tree-row' }, button, link(href, label, { class: 'tree-link', 'data-tree-key': key })), list);
  const load = async () => {
    button.textContent = '▾';
    button.setAttribute('aria-expanded', 'true');
    try {
      const nodes = await children();
      replace(list, nodes.length ? nodes : h('li', { class: 'tree-empty' }, 'empty'));
    } catch {
      replace(list, h('li', { class: 'tree-empty' }, 'unavailable'));
    }
  };
  button.addEventListener('click', () => {
    if (open.has(key)) {
      open.delete(key);
      button.textContent = '▸';
      button.setAttribute('aria-expanded', 'false');
      list.replaceChildren();
    } else {
      open.add(key);
      load();
    }
  });
  if (open.has(key)) load();
  return item;
}

async function topics(tenant: string, ns: string): Promise<Node[]> {
  const names = new Set<string>();
  for (const full of await api.topics(tenant, ns)) names.add(full.replace(/-partition-\d+$/, ''));
  const sorted = [...names].sort();
  const shown = sorted.slice(0, MAX_TOPICS).map((full) => {
    const p = parseTopic(full);
    if (!p) return null;
    const label = p.domain === 'persistent' ? p.topic : `${p.topic} (non-persistent)`;
    return h('li', { class: 'tree-item depth-2' }, h('div', { class: 'tree-row' }, h('span', { class: 'tree-leaf' }),
      link(topicPageHref(p.domain, tenant, ns, p.topic), label, { class: 'tree-link' })));
  });
  if (sorted.length > MAX_TOPICS) {
    shown.push(h('li', { class: 'tree-item depth-2' }, link(namespaceHref(tenant, ns),
      `… all ${sorted.length.toLocaleString('en-US')} topics`, { class: 'tree-link muted' })));
  }
  return shown.filter((n): n is HTMLLIElement => n !== null);
}

async function namespaces(tenant: string): Promise<Node[]> {
  return (await api.namespaces(tenant)).map((full) => {
    const ns = full.slice(full.indexOf('/') + 1);
    return toggle(`${tenant}/${ns}`, ns, namespaceHref(tenant, ns), () => topics(tenant, ns), 1);
  });
}

export function sidebar(): HTMLElement {
  const list = h('ul', { class: 'tree' });
  const el = h('aside', { class: 'sidebar', 'aria-label': 'Tenants, namespaces and topics' },
    h('div', { class: 'sidebar-title' }, 'Browse'), list);

  const reload = async () => {
    try {
      const tenants = await api.tenants();
      replace(list, tenants.map((t) => toggle(t, t, tenantHref(t), () => namespaces(t), 0)));
    } catch {
      replace(list, h('li', { class: 'tree-empty' }, 'The node cannot be reached.'));
    }
    highlight();
  };

  // Opens the branches above the page shown and marks its link.
  const follow = () => {
    const parts = location.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    let changed = false;
    const openKey = (k: string) => {
      if (!open.has(k)) {
        open.add(k);
        changed = true;
      }
    };
    if (parts[0] === 'tenants' && parts[1]) {
      openKey(parts[1]);
      if (parts[2]) openKey(`${parts[1]}/${parts[2]}`);
    }
    if (changed) reload();
    else highlight();
  };

  const highlight = () => {
    for (const a of list.querySelectorAll('a.tree-link')) {
      a.classList.toggle('current', a.getAttribute('href') === location.pathname);
    }
  };

  window.addEventListener('popstate', follow);
  window.addEventListener('magnetar:changed', reload);
  // Links inside the tree are ordinary console links; the shell navigates.
  reload().then(follow);
  return el;
}
