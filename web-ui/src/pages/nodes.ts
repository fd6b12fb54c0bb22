// Nodes: the members of this node's cluster (a standalone node alone),
// refreshed every few seconds, with each broker's load and the load
// manager's last decisions, and the storage nodes with what self-healing is
// copying (a cluster member only).
import { Fragment, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ClusterLoad, ClusterNode, ClusterStorage, Healing, LoadDecision, StorageNode } from '../api';
import { DataTable } from '../table';
import { useNotice } from '../dom';

const REFRESH_MS = 3000;

export function NodesPage() {
  const status = useNotice();
  // null until the first answer: an empty table then would say there are no nodes.
  const [rows, setRows] = useState<ClusterNode[] | null>(null);
  // null on a standalone node, which has no load manager.
  const [load, setLoad] = useState<ClusterLoad | null>(null);
  // null on a standalone node, which keeps one copy of each ledger.
  const [storage, setStorage] = useState<ClusterStorage | null>(null);
  useEffect(() => {
    document.title = 'Nodes · Magnetar';
    let stopped = false;
    const load = async () => {
      try {
        const nodes = await api.nodes();
        if (!stopped) setRows(nodes);
        const balance = await api.clusterLoad().catch(() => null);
        if (!stopped) setLoad(balance);
        const copies = await api.clusterStorage().catch(() => null);
        if (!stopped) setStorage(copies);
      } catch (e) {
        if (!stopped) status.error(e);
      }
    };
    load();
    const timer = setInterval(load, REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);

  const yes = (b: boolean) => (b ? 'yes' : 'no');
  const report = (id: number) => load?.brokers.find((b) => b.node === id);
  const rate = (n: ClusterNode) => {
    const r = report(n.id);
    return r ? r.msgRateIn + r.msgRateOut : 0;
  };
  const columns = [
    { title: 'Node', value: (n: ClusterNode) => String(n.id) },
    { title: 'Cluster address', value: (n: ClusterNode) => n.clusterAddress || '—' },
    { title: 'Role', value: (n: ClusterNode) => n.raftRole },
    { title: 'Leader', value: (n: ClusterNode) => (n.leader ? 'leader' : '') },
    { title: 'Alive', value: (n: ClusterNode) => yes(n.alive) },
    { title: 'Bundles', value: (n: ClusterNode) => (n.ownedBundles || []).length, numeric: true,
      render: (n: ClusterNode) => String((n.ownedBundles || []).length) },
    { title: 'Msg/s', value: rate, numeric: true, render: (n: ClusterNode) => (report(n.id) ? rate(n).toFixed(0) : '—') },
    { title: 'CPU', value: (n: ClusterNode) => report(n.id)?.cpu ?? 0, numeric: true,
      render: (n: ClusterNode) => {
        const cpu = report(n.id)?.cpu;
        return cpu === undefined ? '—' : `${(cpu * 100).toFixed(0)}%`;
      } },
    { title: 'Pulsar', value: (n: ClusterNode) => n.brokerServiceUrl || '' },
    { title: 'Kafka', value: (n: ClusterNode) => n.kafkaAddress || '' },
    { title: 'Web', value: (n: ClusterNode) => n.httpUrl || '' },
  ];
  return h(Fragment, {}, h('h1', {}, 'Nodes'),
    h('p', { class: 'muted' }, 'Every member of this cluster: its Raft role, whether the leader hears from it, and ',
      'the bundles of topics it owns. A standalone node is its only member.'),
    status.el,
    h(DataTable<ClusterNode>, { columns, rows: rows ?? [], testid: 'nodes-table',
      empty: rows === null ? 'Loading…' : 'No nodes.',
      rowKey: (n: ClusterNode) => String(n.id) }),
    load && h(Fragment, {},
      h('h2', {}, 'Load balancing'),
      h('p', { class: 'muted' }, 'Bundles the load manager moved, newest first, and why: msg-rate (a broker above ',
        'the average message rate), bundle-count (a broker owning two bundles more than another).'),
      h(DataTable<LoadDecision>, { columns: decisionColumns, rows: load.decisions, testid: 'load-decisions',
        empty: 'No bundle moved or split yet.', rowKey: (d: LoadDecision) => `${d.at}-${d.bundle}` })),
    storage && h(Fragment, {},
      h('h2', {}, 'Storage'),
      h('p', { class: 'muted', 'data-testid': 'storage-summary' },
        `${storage.ledgers} ledgers; ${storage.underReplicatedFragments} copies under-replicated (on a node `,
        'that is gone or being decommissioned). Self-healing makes them again on other nodes.'),
      storage.healing && h('p', { 'data-testid': 'healing' }, healingText(storage.healing)),
      h(DataTable<StorageNode>, { columns: storageColumns, rows: storage.storageNodes, testid: 'storage-nodes',
        empty: 'No storage node.', rowKey: (n: StorageNode) => String(n.id) })));
}

const mib = (bytes: number) => `${(bytes / (1 << 20)).toFixed(1)} MiB`;

function healingText(s: Healing): string {
  const limit = s.rateLimitBytesPerSecond ? `${mib(s.rateLimitBytesPerSecond)}/s` : 'no limit';
  const done = `Node ${s.healer} heals: ${s.healedFragments} fragments, ${mib(s.healedBytes)} copied (throttle ${limit}).`;
  const c = s.copy;
  if (!s.copying || !c) return done;
  const span = Math.max(1, c.lastEntry - c.firstEntry + 1);
  const pct = Math.min(100, Math.round((100 * (c.nextEntry - c.firstEntry)) / span));
  return `${done} Now copying ledger ${c.ledger} entries ${c.firstEntry}..${c.lastEntry} from node ${c.fromNode} ` +
    `to node ${c.toNode}: ${pct}%, ${mib(c.bytesPerSecond)}/s.`;
}

const storageColumns = [
  { title: 'Node', value: (n: StorageNode) => String(n.id) },
  { title: 'Alive', value: (n: StorageNode) => (n.alive ? 'yes' : 'no') },
  { title: 'Zone', value: (n: StorageNode) => n.zone || '—' },
  { title: 'State', value: (n: StorageNode) => n.state },
  { title: 'Fragments', value: (n: StorageNode) => n.fragments, numeric: true,
    render: (n: StorageNode) => String(n.fragments) },
  { title: 'Ledgers', value: (n: StorageNode) => n.ledgers, numeric: true,
    render: (n: StorageNode) => String(n.ledgers) },
];

const decisionColumns = [
  { title: 'When', value: (d: LoadDecision) => d.at, render: (d: LoadDecision) => new Date(d.at).toLocaleString() },
  { title: 'Bundle', value: (d: LoadDecision) => d.bundle },
  { title: 'From', value: (d: LoadDecision) => String(d.from) },
  // A split keeps its pieces on their broker.
  { title: 'To', value: (d: LoadDecision) => (d.reason.startsWith('split') ? '(split in place)' : String(d.to)) },
  { title: 'Reason', value: (d: LoadDecision) => d.reason },
  { title: 'Detail', value: (d: LoadDecision) => d.detail },
  { title: 'Done', value: (d: LoadDecision) => (d.done === undefined ? 'under way' : d.done ? 'yes' : d.error || 'no') },
];
