// Nodes: the members of this node's cluster (a standalone node alone),
// refreshed every few seconds.
import { Fragment, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ClusterNode } from '../api';
import { DataTable } from '../table';
import { useNotice } from '../dom';

const REFRESH_MS = 3000;

export function NodesPage() {
  const status = useNotice();
  // null until the first answer: an empty table then would say there are no nodes.
  const [rows, setRows] = useState<ClusterNode[] | null>(null);
  useEffect(() => {
    document.title = 'Nodes · Magnetar';
    let stopped = false;
    const load = async () => {
      try {
        const nodes = await api.nodes();
        if (!stopped) setRows(nodes);
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
  const columns = [
    { title: 'Node', value: (n: ClusterNode) => String(n.id) },
    { title: 'Cluster address', value: (n: ClusterNode) => n.clusterAddress || '—' },
    { title: 'Role', value: (n: ClusterNode) => n.raftRole },
    { title: 'Leader', value: (n: ClusterNode) => (n.leader ? 'leader' : '') },
    { title: 'Alive', value: (n: ClusterNode) => yes(n.alive) },
    { title: 'Bundles', value: (n: ClusterNode) => (n.ownedBundles || []).length, numeric: true,
      render: (n: ClusterNode) => String((n.ownedBundles || []).length) },
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
      rowKey: (n: ClusterNode) => String(n.id) }));
}
