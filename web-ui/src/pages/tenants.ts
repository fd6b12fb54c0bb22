// Tenants: list, create, delete.
import { Fragment, h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, isSuperuser } from '../api';
import { DataTable } from '../table';
import { changed, dangerButton, inlineForm, link, NAME_HINT, navigate, useNotice } from '../dom';
import { tenantHref } from './links';

interface Row {
  name: string;
  namespaces: number | null;
}

export function TenantsPage() {
  const status = useNotice();
  const [rows, setRows] = useState<Row[]>([]);
  const name = useRef<HTMLInputElement>(null);

  async function load() {
    try {
      const tenants = await api.tenants();
      const list: Row[] = tenants.map((t) => ({ name: t, namespaces: null }));
      setRows(list);
      const counted = await Promise.all(list.map(async (r) => {
        try {
          return { name: r.name, namespaces: (await api.namespaces(r.name)).length };
        } catch {
          return r;
        }
      }));
      setRows(counted);
    } catch (e) {
      status.error(e);
    }
  }
  useEffect(() => {
    document.title = 'Tenants · Magnetar';
    load();
  }, []);

  // Creating and deleting tenants is for superusers; a tenant admin sees the
  // tenants it administers.
  const superuser = isSuperuser();
  const columns = [
    { title: 'Tenant', value: (r: Row) => r.name, render: (r: Row) => link(tenantHref(r.name), r.name) },
    { title: 'Namespaces', value: (r: Row) => r.namespaces ?? -1,
      render: (r: Row) => (r.namespaces === null ? '—' : String(r.namespaces)), numeric: true },
    ...(superuser ? [{ title: '', value: () => '', render: (r: Row) => dangerButton('Delete', status, async () => {
      await api.deleteTenant(r.name);
      changed();
      status.ok(`Tenant ${r.name} deleted.`);
      await load();
    }, { 'data-testid': `delete-tenant-${r.name}` }) }] : []),
  ];

  return h(Fragment, {}, h('h1', {}, 'Tenants'),
    superuser ? inlineForm([h('input', { ref: name, name: 'tenant', placeholder: 'new tenant name', required: true,
      title: NAME_HINT, 'aria-label': 'Tenant name' })], 'Create tenant', async (n) => {
      const t = name.current!.value.trim();
      await api.createTenant(t);
      changed();
      n.ok(`Tenant ${t} created.`);
      navigate(tenantHref(t));
    }, 'create-tenant') : null,
    status.el,
    h(DataTable<Row>, { columns, rows, testid: 'tenants-table',
      empty: superuser ? 'No tenants yet. Create one above.' : 'Your role administers no tenant.',
      rowKey: (r: Row) => r.name }));
}
