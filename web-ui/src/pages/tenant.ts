// One tenant: its settings and its namespaces (create, delete).
import { api } from '../api';
import { DataTable } from '../table';
import { changed, dangerButton, h, inlineForm, link, NAME_HINT, navigate, notice, replace } from '../dom';
import { namespaceHref } from './links';

export function tenantPage(root: HTMLElement, [tenant]: string[]) {
  document.title = `${tenant} · Magnetar`;
  const status = notice();
  const info = h('p', { class: 'muted' });
  const settings = h('div', { class: 'panel', 'data-testid': 'tenant-settings' });
  const table = new DataTable<string>([
    { title: 'Namespace', value: (ns) => ns, render: (ns) => link(namespaceHref(tenant, ns), `${tenant}/${ns}`) },
    { title: '', value: () => '', render: (ns) => dangerButton('Delete', status, async () => {
      await api.deleteNamespace(tenant, ns);
      changed();
      status.ok(`Namespace ${tenant}/${ns} deleted.`);
      await load();
    }, { 'data-testid': `delete-namespace-${ns}` }) },
  ], 'This tenant has no namespaces yet. Create one above.', 50, 'namespaces-table');

  const name = h('input', { name: 'namespace', placeholder: 'new namespace name', required: true, title: NAME_HINT,
    'aria-label': 'Namespace name' });
  const form = inlineForm([name], 'Create namespace', async (n) => {
    const ns = name.value.trim();
    await api.createNamespace(tenant, ns);
    changed();
    n.ok(`Namespace ${tenant}/${ns} created.`);
    navigate(namespaceHref(tenant, ns));
  }, 'create-namespace');

  root.append(
    h('div', { class: 'crumbs' }, link('/tenants', 'Tenants'), ' / ', tenant),
    h('h1', {}, `Tenant ${tenant}`),
    info, settings, h('h2', {}, 'Namespaces'), form, status.el, table.el);

  async function showSettings() {
    const [t, clusters] = await Promise.all([api.tenant(tenant), api.clusters()]);
    const roles = h('input', { name: 'adminRoles', value: t.adminRoles.join(', '), placeholder: 'role, role',
      'aria-label': 'Admin roles' });
    const boxes = clusters.map((c) => h('input', { type: 'checkbox', value: c, checked: t.allowedClusters.includes(c),
      'aria-label': `Allow cluster ${c}` }));
    replace(settings, h('h3', {}, 'Settings'), inlineForm([
      h('label', { class: 'field-inline' }, 'Admin roles ', roles),
      h('span', { class: 'field-inline' }, 'Allowed clusters: ', boxes.map((b) => h('label', {}, b, ' ', b.value, ' '))),
    ], 'Save settings', async (n) => {
      await api.updateTenant(tenant, {
        adminRoles: roles.value.split(',').map((r) => r.trim()).filter(Boolean),
        allowedClusters: boxes.filter((b) => b.checked).map((b) => b.value),
      });
      n.ok('Saved.');
      await load();
    }, 'tenant-settings-form'));
  }
  showSettings().catch((e) => status.error(e));

  async function load() {
    try {
      const [t, namespaces] = await Promise.all([api.tenant(tenant), api.namespaces(tenant)]);
      replace(info, `Allowed clusters: ${t.allowedClusters.join(', ') || 'none'} · Admin roles: ${
        t.adminRoles.join(', ') || 'none'}`);
      table.set(namespaces.map((full) => full.slice(full.indexOf('/') + 1)));
    } catch (e) {
      status.error(e);
    }
  }
  load();
}
