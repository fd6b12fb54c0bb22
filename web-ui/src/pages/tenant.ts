// One tenant: its settings and its namespaces (create, delete).
import { Fragment, h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, isSuperuser, TenantInfo } from '../api';
import { DataTable } from '../table';
import { changed, dangerButton, inlineForm, link, NAME_HINT, navigate, useNotice } from '../dom';
import { namespaceHref } from './links';
import type { PageProps } from '../main';

function Settings({ tenant, info, clusters, saved }: {
  tenant: string; info: TenantInfo; clusters: string[]; saved: () => Promise<void>;
}) {
  const roles = useRef<HTMLInputElement>(null);
  const boxes = useRef<Record<string, HTMLInputElement | null>>({});
  return h(Fragment, {}, h('h3', {}, 'Settings'), inlineForm([
    h('label', { class: 'field-inline' }, 'Admin roles ', h('input', { ref: roles, name: 'adminRoles',
      defaultValue: info.adminRoles.join(', '), placeholder: 'role, role', 'aria-label': 'Admin roles' })),
    h('span', { class: 'field-inline' }, 'Allowed clusters: ', clusters.map((c) => h('label', { key: c },
      h('input', { type: 'checkbox', value: c, defaultChecked: info.allowedClusters.includes(c),
        'aria-label': `Allow cluster ${c}`, ref: (el: HTMLInputElement | null) => { boxes.current[c] = el; } }),
      ' ', c, ' '))),
  ], 'Save settings', async (n) => {
    await api.updateTenant(tenant, {
      adminRoles: roles.current!.value.split(',').map((r) => r.trim()).filter(Boolean),
      allowedClusters: clusters.filter((c) => boxes.current[c]?.checked),
    });
    n.ok('Saved.');
    await saved();
  }, 'tenant-settings-form'));
}

export function TenantPage({ params: [tenant] }: PageProps) {
  const status = useNotice();
  const [info, setInfo] = useState<TenantInfo | null>(null);
  const [namespaces, setNamespaces] = useState<string[]>([]);
  const [settings, setSettings] = useState<{ info: TenantInfo; clusters: string[] } | null>(null);
  const name = useRef<HTMLInputElement>(null);

  async function load() {
    try {
      const [t, list] = await Promise.all([api.tenant(tenant), api.namespaces(tenant)]);
      setInfo(t);
      setNamespaces(list.map((full) => full.slice(full.indexOf('/') + 1)));
    } catch (e) {
      status.error(e);
    }
  }
  useEffect(() => {
    document.title = `${tenant} · Magnetar`;
    // Changing a tenant's admins and clusters is for superusers.
    if (isSuperuser()) {
      Promise.all([api.tenant(tenant), api.clusters()])
        .then(([t, clusters]) => setSettings({ info: t, clusters }))
        .catch((e) => status.error(e));
    }
    load();
  }, []);

  const columns = [
    { title: 'Namespace', value: (ns: string) => ns, render: (ns: string) => link(namespaceHref(tenant, ns), `${tenant}/${ns}`) },
    { title: '', value: () => '', render: (ns: string) => dangerButton('Delete', status, async () => {
      await api.deleteNamespace(tenant, ns);
      changed();
      status.ok(`Namespace ${tenant}/${ns} deleted.`);
      await load();
    }, { 'data-testid': `delete-namespace-${ns}` }) },
  ];

  return h(Fragment, {},
    h('div', { class: 'crumbs' }, link('/tenants', 'Tenants'), ' / ', tenant),
    h('h1', {}, `Tenant ${tenant}`),
    h('p', { class: 'muted' }, info ? `Allowed clusters: ${info.allowedClusters.join(', ') || 'none'} · Admin roles: ${
      info.adminRoles.join(', ') || 'none'}` : null),
    info?.homeCluster ? h('p', { class: 'muted', 'data-testid': 'tenant-home' },
      `Home cluster: ${info.homeCluster} (its configuration is edited there and sent to the other allowed clusters)`)
      : null,
    settings ? h('div', { class: 'panel', 'data-testid': 'tenant-settings' },
      h(Settings, { tenant, ...settings, saved: load })) : null,
    h('h2', {}, 'Namespaces'),
    inlineForm([h('input', { ref: name, name: 'namespace', placeholder: 'new namespace name', required: true,
      title: NAME_HINT, 'aria-label': 'Namespace name' })], 'Create namespace', async (n) => {
      const ns = name.current!.value.trim();
      await api.createNamespace(tenant, ns);
      changed();
      n.ok(`Namespace ${tenant}/${ns} created.`);
      navigate(namespaceHref(tenant, ns));
    }, 'create-namespace'),
    status.el,
    h(DataTable<string>, { columns, rows: namespaces, empty: 'This tenant has no namespaces yet. Create one above.',
      testid: 'namespaces-table', rowKey: (ns: string) => ns }));
}
