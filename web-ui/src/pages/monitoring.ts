// Metrics: everything /metrics serves (Prometheus text format), parsed into
// a searchable table and refreshed every few seconds.
import { Fragment, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { usePoll, useNotice } from '../dom';
import { Column, DataTable } from '../table';

interface Sample {
  name: string;
  labels: string;
  value: number;
  help: string;
}

export function parseMetrics(text: string): Sample[] {
  const help = new Map<string, string>();
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# HELP ')) {
      const rest = line.slice(7);
      const sp = rest.indexOf(' ');
      help.set(rest.slice(0, sp), rest.slice(sp + 1));
      continue;
    }
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const family = [...help.keys()].find((f) => m[1] === f || m[1].startsWith(f + '_')) ?? m[1];
    out.push({ name: m[1], labels: m[2] ? m[2].slice(1, -1) : '', value: Number(m[3]), help: help.get(family) ?? '' });
  }
  return out;
}

const COLUMNS: Column<Sample>[] = [
  { title: 'Metric', value: (s) => s.name, render: (s) => h('span', { class: 'mono', title: s.help }, s.name) },
  { title: 'Labels', value: (s) => s.labels, render: (s) => h('span', { class: 'mono small' }, s.labels) },
  { title: 'Value', value: (s) => s.value, numeric: true,
    render: (s) => (Number.isInteger(s.value) ? String(s.value) : s.value.toPrecision(6)) },
  { title: 'Meaning', value: (s) => s.help },
];

export function MonitoringPage() {
  const status = useNotice();
  const [rows, setRows] = useState<Sample[]>([]);
  useEffect(() => {
    document.title = 'Metrics · Magnetar';
  }, []);
  usePoll(5000, async () => {
    try {
      setRows(parseMetrics(await api.metricsText()));
      status.clear();
    } catch (e) {
      status.error(e);
    }
  });
  return h(Fragment, {}, h('h1', {}, 'Metrics'),
    h('p', { class: 'muted' }, 'What ', h('a', { href: '/metrics' }, '/metrics'),
      ' serves to Prometheus, refreshed every 5 seconds.'),
    status.el,
    h(DataTable<Sample>, { columns: COLUMNS, rows, empty: 'The node serves no metrics.', pageSize: 100,
      testid: 'metrics-table' }));
}
