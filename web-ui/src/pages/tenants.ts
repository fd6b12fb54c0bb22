// Tenants: list, create, delete.
import { api } from '../api';
import { DataTable } from '../table';
import { changed, dangerButton, h, inlineForm, link, NAME_HINT, navigate, notice } from '../dom';
import { tenantHref } from './links';

interface Row {
  name: string;
  namespaces: number | null;
}

export function tenantsPage(root: HTMLElement) {
  document.title = 'Tenants · Magnetar';
  const status = notice();
  const table: DataTable<Row> = new DataTable<Row>([
    { title: 'Tenant', value: (r) => r.name, render: (r) => link(tenantHref(r.name), r.name) },
    { title: 'Namespaces', value: (r) => r.namespaces ?? -1, render: (r) => (r.namespaces === null ? '—' : String(r.namespaces)),
      numeric: true },
    { title: '', value: () => '', render: (r) => dangerButton('Delete', status, async () => {
      await api.deleteTenant(r.name);
      changed();
      status.ok(`Tenant ${r.name} deleted.`);
      await load();
    }, { 'data-testid': `delete-tenant-${r.name}` }) },
  ], 'No tenants yet. Create one above.', 50, 'tenants-table');

  const name = h('input', { name: 'tenant', placeholder: 'new tenant name', required: true, title: NAME_HINT,
    'aria-label': 'Tenant name' });
  const form = inlineForm([name], 'Create tenant', async (n) => {
    await api.createTenant(name.value.trim());
    changed();
    n.ok(`Tenant ${name.value.trim()} created.`);
    navigate(tenantHref(name.value.trim()));
  }, 'create-tenant');

  root.append(h('h1', {}, 'Tenants'), form, status.el, table.el);

  async function load() {
    try {
      const tenants = await api.tenants();
      const rows: Row[] = tenants.map((t) => ({ name: t, namespaces: null }));
      table.set(rows);
      await Promise.all(rows.map(async (r) => {
        try {
          r.namespaces = (await api.namespaces(r.name)).length;
        } catch {
          r.namespaces = null;
        }
      }));
      table.set(rows);
    } catch (e) {
      status.error(e);
    }
  }
  load();
}
