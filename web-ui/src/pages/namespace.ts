// One namespace: its topics (create partitioned or not, delete) and its
// policies (pages/policies.ts), as two tabs.
import { Fragment, h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Domain } from '../api';
import { DataTable } from '../table';
import { changed, dangerButton, inlineForm, link, NAME_HINT, navigate, Notice, useNotice } from '../dom';
import { namespaceHref, parseTopic, tenantHref, topicPageHref } from './links';
import { PoliciesPanel } from './policies';
import type { PageProps } from '../main';

interface TopicRow {
  name: string;      // local name
  domain: Domain;
  partitions: number;  // 0: not partitioned
}

export function NamespacePage({ params: [tenant, ns], query }: PageProps) {
  const tab = query.get('tab') === 'policies' ? 'policies' : 'topics';
  useEffect(() => {
    document.title = `${tenant}/${ns} · Magnetar`;
  }, []);
  return h(Fragment, {},
    h('div', { class: 'crumbs' }, link('/tenants', 'Tenants'), ' / ', link(tenantHref(tenant), tenant), ' / ', ns),
    h('h1', {}, `Namespace ${tenant}/${ns}`),
    h('div', { class: 'tabs', role: 'tablist' },
      link(namespaceHref(tenant, ns), 'Topics', { class: tab === 'topics' ? 'tab active' : 'tab', role: 'tab' }),
      link(namespaceHref(tenant, ns) + '?tab=policies', 'Policies',
        { class: tab === 'policies' ? 'tab active' : 'tab', role: 'tab' })),
    tab === 'policies' ? h(PoliciesPanel, { tenant, ns }) : h(Topics, { tenant, ns }));
}

function topicColumns(tenant: string, ns: string, status: Notice, load: () => Promise<void>) {
  return [
    { title: 'Topic', value: (r: TopicRow) => r.name,
      render: (r: TopicRow) => link(topicPageHref(r.domain, tenant, ns, r.name), r.name) },
    { title: 'Domain', value: (r: TopicRow) => r.domain },
    { title: 'Partitions', value: (r: TopicRow) => r.partitions,
      render: (r: TopicRow) => (r.partitions ? String(r.partitions) : '—'), numeric: true },
    { title: '', value: () => '', render: (r: TopicRow) => dangerButton('Delete', status, async () => {
      await api.deleteTopic(r.domain, tenant, ns, r.name, r.partitions > 0);
      changed();
      status.ok(`Topic ${r.domain}://${tenant}/${ns}/${r.name} deleted.`);
      await load();
    }, { 'data-testid': `delete-topic-${r.name}` }) },
  ];
}

function Topics({ tenant, ns }: { tenant: string; ns: string }) {
  const status = useNotice();
  const [rows, setRows] = useState<TopicRow[]>([]);
  const name = useRef<HTMLInputElement>(null);
  const domain = useRef<HTMLSelectElement>(null);
  const partitions = useRef<HTMLInputElement>(null);

  async function load() {
    try {
      const [all, partitionedP, partitionedN] = await Promise.all([
        api.topics(tenant, ns),
        api.partitionedTopics('persistent', tenant, ns),
        api.partitionedTopics('non-persistent', tenant, ns),
      ]);
      const found = new Map<string, TopicRow>();
      for (const full of [...partitionedP, ...partitionedN]) {
        const p = parseTopic(full);
        if (p) found.set(full, { name: p.topic, domain: p.domain, partitions: 0 });
      }
      for (const full of all) {
        const m = /^(.*)-partition-(\d+)$/.exec(full);
        const parent = m ? found.get(m[1]) : undefined;
        if (parent) {
          parent.partitions = Math.max(parent.partitions, Number(m![2]) + 1);
          continue;
        }
        const p = parseTopic(full);
        if (p && !found.has(full)) found.set(full, { name: p.topic, domain: p.domain, partitions: 0 });
      }
      setRows([...found.values()]);
    } catch (e) {
      status.error(e);
    }
  }
  useEffect(() => {
    load();
  }, []);

  return h(Fragment, {},
    inlineForm([
      h('input', { ref: name, name: 'topic', placeholder: 'new topic name', required: true, title: NAME_HINT,
        'aria-label': 'Topic name' }),
      h('select', { ref: domain, name: 'domain', 'aria-label': 'Domain' },
        h('option', { value: 'persistent' }, 'persistent'), h('option', { value: 'non-persistent' }, 'non-persistent')),
      h('label', { class: 'field-inline' }, 'partitions ', h('input', { ref: partitions, name: 'partitions',
        type: 'number', min: 0, max: 10000, defaultValue: '0', 'aria-label': 'Partitions',
        title: '0 for a topic that is not partitioned' })),
    ], 'Create topic', async (n) => {
      const topic = name.current!.value.trim();
      const d = domain.current!.value as Domain;
      await api.createTopic(d, tenant, ns, topic, Number(partitions.current!.value || 0));
      changed();
      n.ok(`Topic ${d}://${tenant}/${ns}/${topic} created.`);
      navigate(topicPageHref(d, tenant, ns, topic));
    }, 'create-topic'),
    status.el,
    h(DataTable<TopicRow>, { columns: topicColumns(tenant, ns, status, load), rows,
      empty: 'No topics yet. Create one above, or produce to one: Pulsar clients create topics on first use.',
      testid: 'topics-table', rowKey: (r: TopicRow) => `${r.domain}/${r.name}` }));
}
