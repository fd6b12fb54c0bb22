// A table with a search box, sortable columns and paging, for lists that can
// hold thousands of rows (10,000 topics): only one page is in the DOM.
import { ComponentChildren, h } from 'preact';
import { useMemo, useState } from 'preact/hooks';

export interface Column<T> {
  title: string;
  value: (row: T) => string | number;   // what sorting and searching use
  render?: (row: T) => ComponentChildren; // what the cell shows (default: value)
  numeric?: boolean;
}

export function DataTable<T>({ columns, rows, empty, pageSize = 50, testid, rowKey }: {
  columns: Column<T>[];
  rows: T[];
  empty: string;
  pageSize?: number;
  testid?: string;
  rowKey?: (row: T) => string;
}) {
  const [filter, setFilter] = useState('');
  const [sortColumn, setSortColumn] = useState(0);
  const [ascending, setAscending] = useState(true);
  const [page, setPage] = useState(0);

  const col = columns[sortColumn];
  const sorted = useMemo(() => {
    let out = rows;
    if (filter) out = out.filter((r) => columns.some((c) => String(c.value(r)).toLowerCase().includes(filter)));
    return [...out].sort((a, b) => {
      const va = col.value(a);
      const vb = col.value(b);
      // Plain comparison, not localeCompare: ten times faster on 10,000 rows.
      const cmp = typeof va === 'number' && typeof vb === 'number' ? va - vb : va < vb ? -1 : va > vb ? 1 : 0;
      return ascending ? cmp : -cmp;
    });
  }, [rows, filter, sortColumn, ascending]);

  const pages = Math.max(1, Math.ceil(sorted.length / pageSize));
  const current = Math.min(page, pages - 1);
  const shown = sorted.slice(current * pageSize, (current + 1) * pageSize);

  const head = h('tr', {}, columns.map((c, i) => h('th', {
    class: c.numeric ? 'num sortable' : 'sortable',
    onClick: () => {
      if (sortColumn === i) setAscending(!ascending);
      else {
        setSortColumn(i);
        setAscending(!c.numeric);
      }
    },
  }, c.title + (i === sortColumn ? (ascending ? ' ▲' : ' ▼') : ''))));

  const body = shown.length === 0
    ? h('tr', {}, h('td', { colspan: columns.length, class: 'empty' },
      rows.length === 0 ? empty : 'Nothing matches the filter.'))
    : shown.map((r) => h('tr', { key: rowKey ? rowKey(r) : undefined }, columns.map((c) =>
      h('td', { class: c.numeric ? 'num' : undefined }, c.render ? c.render(r) : String(c.value(r))))));

  return h('div', { class: 'table-wrap', 'data-testid': testid },
    h('input', { type: 'search', placeholder: 'Filter…', class: 'table-filter', 'aria-label': 'Filter',
      onInput: (e: Event) => {
        setFilter((e.target as HTMLInputElement).value.trim().toLowerCase());
        setPage(0);
      } }),
    h('table', {}, h('thead', {}, head), h('tbody', {}, body)),
    h('div', { class: 'table-footer' },
      `${sorted.length.toLocaleString('en-US')} of ${rows.length.toLocaleString('en-US')}`,
      pages > 1 ? h('span', { class: 'pager' },
        h('button', { class: 'small', disabled: current === 0, onClick: () => setPage(current - 1) }, '‹ Prev'),
        ` page ${current + 1} of ${pages} `,
        h('button', { class: 'small', disabled: current >= pages - 1, onClick: () => setPage(current + 1) }, 'Next ›'))
        : null));
}
