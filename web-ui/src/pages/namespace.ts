// One namespace: its topics (create partitioned or not, delete) and its
// policies (pages/policies.ts), as two tabs.
import { api, Domain } from '../api';
import { DataTable } from '../table';
import { changed, dangerButton, h, inlineForm, link, NAME_HINT, navigate, notice } from '../dom';
import { namespaceHref, parseTopic, tenantHref, topicPageHref } from './links';
import { policiesPanel } from './policies';

interface TopicRow {
  name: string;      // local name
  domain: Domain;
  partitions: number;  // 0: not partitioned
}

export function namespacePage(root: HTMLElement, [tenant, ns]: string[], query: URLSearchParams) {
  document.title = `${tenant}/${ns} · Magnetar`;
  const tab = query.get('tab') === 'policies' ? 'policies' : 'topics';
  const tabs = h('div', { class: 'tabs', role: 'tablist' },
    link(namespaceHref(tenant, ns), 'Topics', { class: tab === 'topics' ? 'tab active' : 'tab', role: 'tab' }),
    link(namespaceHref(tenant, ns) + '?tab=policies', 'Policies',
      { class: tab === 'policies' ? 'tab active' : 'tab', role: 'tab' }));
  root.append(
    h('div', { class: 'crumbs' }, link('/tenants', 'Tenants'), ' / ', link(tenantHref(tenant), tenant), ' / ', ns),
    h('h1', {}, `Namespace ${tenant}/${ns}`),
    tabs);
  if (tab === 'policies') {
    root.append(policiesPanel(tenant, ns));
    return;
  }

  const status = notice();
  const table = new DataTable<TopicRow>([
    { title: 'Topic', value: (r) => r.name, render: (r) => link(topicPageHref(r.domain, tenant, ns, r.name), r.name) },
    { title: 'Domain', value: (r) => r.domain },
    { title: 'Partitions', value: (r) => r.partitions, render: (r) => (r.partitions ? String(r.partitions) : '—'),
      numeric: true },
    { title: '', value: () => '', render: (r) => dangerButton('Delete', status, async () => {
      await api.deleteTopic(r.domain, tenant, ns, r.name, r.partitions > 0);
      changed();
      status.ok(`Topic ${r.domain}://${tenant}/${ns}/${r.name} deleted.`);
      await load();
    }, { 'data-testid': `delete-topic-${r.name}` }) },
  ], 'No topics yet. Create one above, or produce to one: Pulsar clients create topics on first use.', 50,
  'topics-table');

  const name = h('input', { name: 'topic', placeholder: 'new topic name', required: true, title: NAME_HINT,
    'aria-label': 'Topic name' });
  const domain = h('select', { name: 'domain', 'aria-label': 'Domain' },
    h('option', { value: 'persistent' }, 'persistent'), h('option', { value: 'non-persistent' }, 'non-persistent'));
  const partitions = h('input', { name: 'partitions', type: 'number', min: 0, max: 10000, value: 0,
    'aria-label': 'Partitions', title: '0 for a topic that is not partitioned' });
  const form = inlineForm([name, domain, h('label', { class: 'field-inline' }, 'partitions ', partitions)],
    'Create topic', async (n) => {
      const topic = name.value.trim();
      const d = domain.value as Domain;
      await api.createTopic(d, tenant, ns, topic, Number(partitions.value || 0));
      changed();
      n.ok(`Topic ${d}://${tenant}/${ns}/${topic} created.`);
      navigate(topicPageHref(d, tenant, ns, topic));
    }, 'create-topic');

  root.append(form, status.el, table.el);

  async function load() {
    try {
      const [all, partitionedP, partitionedN] = await Promise.all([
        api.topics(tenant, ns),
        api.partitionedTopics('persistent', tenant, ns),
        api.partitionedTopics('non-persistent', tenant, ns),
      ]);
      const rows = new Map<string, TopicRow>();
      for (const full of [...partitionedP, ...partitionedN]) {
        const p = parseTopic(full);
        if (p) rows.set(full, { name: p.topic, domain: p.domain, partitions: 0 });
      }
      for (const full of all) {
        const m = /^(.*)-partition-(\d+)$/.exec(full);
        const parent = m ? rows.get(m[1]) : undefined;
        if (parent) {
          parent.partitions = Math.max(parent.partitions, Number(m![2]) + 1);
          continue;
        }
        const p = parseTopic(full);
        if (p && !rows.has(full)) rows.set(full, { name: p.topic, domain: p.domain, partitions: 0 });
      }
      table.set([...rows.values()]);
    } catch (e) {
      status.error(e);
    }
  }
  load();
}
