// A namespace's policies, one section per policy, each saved with its own
// POST so that the server's validation error appears next to it. The fields
// are plain form inputs, read by name when a section is saved.
import { ComponentChildren, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, Policies } from '../api';
import { busy, dangerButton, useNotice } from '../dom';

type Input = HTMLInputElement | HTMLSelectElement;

function num(name: string, value: number | null | undefined, hint = '') {
  return h('input', { name, type: 'number', defaultValue: value ?? '', placeholder: hint, 'aria-label': name });
}

function select(name: string, options: [string, string][], chosen: string) {
  return h('select', { name, 'aria-label': name },
    options.map(([value, label]) => h('option', { value, selected: value === chosen }, label)));
}

function input(form: HTMLFormElement, name: string): Input {
  return form.elements.namedItem(name) as Input;
}

// The number typed, or null when the field is empty (the server says what it
// makes of that).
function read(form: HTMLFormElement, name: string): number | null {
  const v = input(form, name).value;
  return v.trim() === '' ? null : Number(v);
}

function field(label: string, control: ComponentChildren, help = '') {
  return h('label', { class: 'field' }, h('span', {}, label), control, help ? h('small', {}, help) : null);
}

function Section({ title, testid, fields, save, remove }: {
  title: string; testid: string; fields: ComponentChildren[];
  save: (form: HTMLFormElement) => Promise<void>; remove?: (form: HTMLFormElement) => Promise<void>;
}) {
  const n = useNotice();
  const [running, setRunning] = useState(false);
  let form: HTMLFormElement | null = null;
  return h('form', { class: 'policy', 'data-testid': testid, ref: (el: HTMLFormElement | null) => { form = el; },
    onSubmit: (e: Event) => {
      e.preventDefault();
      const f = e.currentTarget as HTMLFormElement;
      busy(setRunning, n, async () => {
        await save(f);
        n.ok('Saved.');
      });
    } },
  h('h3', {}, title), h('div', { class: 'fields' }, fields),
  h('div', { class: 'actions' }, h('button', { type: 'submit', disabled: running }, 'Save'),
    remove ? dangerButton('Remove', n, async () => {
      await remove(form!);
      n.ok('Removed.');
    }) : null),
  n.el);
}

function first<T>(map: Record<string, T> | undefined): T | undefined {
  return map ? Object.values(map)[0] : undefined;
}

const ACTIONS = ['produce', 'consume', 'functions', 'sources', 'sinks', 'packages'];

function Permissions({ map }: { map: Record<string, string[]> | undefined }) {
  const entries = Object.entries(map ?? {});
  return h('div', {}, entries.length === 0 ? h('p', { class: 'muted' }, 'No role has permissions here.')
    : h('ul', {}, entries.map(([role, actions]) => h('li', {}, h('b', {}, role), `: ${actions.join(', ')}`))));
}

export function PoliciesPanel({ tenant, ns }: { tenant: string; ns: string }) {
  const status = useNotice();
  const [p, setPolicies] = useState<Policies | null>(null);
  const [permissions, setPermissions] = useState<Record<string, string[]> | undefined>(undefined);
  useEffect(() => {
    api.policies(tenant, ns).then((got) => {
      setPolicies(got);
      setPermissions(got.auth_policies?.namespace_auth);
    }).catch((e) => status.error(e));
  }, []);
  if (p === null) return h('div', { class: 'policies' }, status.el);

  const set = (policy: string, body: unknown) => api.setPolicy(tenant, ns, policy, body);
  const remove = (policy: string) => api.removePolicy(tenant, ns, policy);
  const reloadPermissions = async () => setPermissions((await api.policies(tenant, ns)).auth_policies?.namespace_auth);
  const role = (f: HTMLFormElement) => encodeURIComponent(input(f, 'role').value.trim());

  const retention = p.retention_policies ?? undefined;
  const quota = p.backlog_quota_map?.destination_storage;
  const per = p.persistence ?? undefined;
  const pub = first(p.publishMaxMessageRate);
  const disp = first(p.topicDispatchRate);
  const quotaPolicies = ['producer_request_hold', 'producer_exception', 'consumer_backlog_eviction'];

  return h('div', { class: 'policies' }, status.el,
    h(Section, { title: 'Retention', testid: 'policy-retention',
      fields: [field('Time (minutes)', num('retentionTimeInMinutes', retention?.retentionTimeInMinutes,
        'minutes, -1 unlimited')), field('Size (MB)', num('retentionSizeInMB', retention?.retentionSizeInMB,
        'MB, -1 unlimited'))],
      save: (f) => set('retention', { retentionTimeInMinutes: read(f, 'retentionTimeInMinutes'),
        retentionSizeInMB: read(f, 'retentionSizeInMB') }),
      remove: () => remove('retention') }),
    h(Section, { title: 'Message TTL', testid: 'policy-ttl',
      fields: [field('TTL (seconds)', num('messageTTL', p.message_ttl_in_seconds, 'seconds'))],
      save: (f) => set('messageTTL', read(f, 'messageTTL')), remove: () => remove('messageTTL') }),
    h(Section, { title: 'Backlog quota (storage)', testid: 'policy-backlog-quota',
      fields: [field('Limit size (bytes)', num('limitSize', quota?.limitSize, 'bytes, -1 unlimited')),
        field('Limit time (s)', num('limitTime', quota?.limitTime, 'seconds, -1 unlimited')),
        field('When exceeded', select('policy', quotaPolicies.map((v) => [v, v]), quota?.policy ?? ''))],
      save: (f) => set('backlogQuota?backlogQuotaType=destination_storage',
        { limitSize: read(f, 'limitSize'), limitTime: read(f, 'limitTime'), policy: input(f, 'policy').value }),
      remove: () => remove('backlogQuota?backlogQuotaType=destination_storage') }),
    h(Section, { title: 'Persistence', testid: 'policy-persistence',
      fields: [field('Ensemble', num('bookkeeperEnsemble', per?.bookkeeperEnsemble ?? 1)),
        field('Write quorum', num('bookkeeperWriteQuorum', per?.bookkeeperWriteQuorum ?? 1)),
        field('Ack quorum', num('bookkeeperAckQuorum', per?.bookkeeperAckQuorum ?? 1)),
        field('fsync', select('fsyncMode', [['', "the node's (--fsync)"], ...['always', 'interval', 'never']
          .map((v): [string, string] => [v, v])], per?.fsyncMode ?? ''), 'always: every write is on disk before the ack'),
        field('fsync interval', num('fsyncIntervalMs', per?.fsyncIntervalMs ?? 0, 'ms, for interval'))],
      save: (f) => set('persistence', {
        bookkeeperEnsemble: read(f, 'bookkeeperEnsemble'), bookkeeperWriteQuorum: read(f, 'bookkeeperWriteQuorum'),
        bookkeeperAckQuorum: read(f, 'bookkeeperAckQuorum'),
        managedLedgerMaxMarkDeleteRate: per?.managedLedgerMaxMarkDeleteRate ?? 0,
        fsyncMode: input(f, 'fsyncMode').value || undefined, fsyncIntervalMs: read(f, 'fsyncIntervalMs') ?? 0,
      }),
      remove: () => remove('persistence') }),
    h(Section, { title: 'Deduplication', testid: 'policy-deduplication',
      fields: [field('Deduplication', select('deduplication', [['true', 'enabled'], ['false', 'disabled']],
        p.deduplicationEnabled === true ? 'true' : 'false'))],
      save: (f) => set('deduplication', input(f, 'deduplication').value === 'true'),
      remove: () => remove('deduplication') }),
    h(Section, { title: 'Publish rate (per topic)', testid: 'policy-publish-rate',
      fields: [field('Messages/s', num('publishThrottlingRateInMsg', pub?.publishThrottlingRateInMsg,
        'msgs/s, -1 unlimited')), field('Bytes/s', num('publishThrottlingRateInByte',
        pub?.publishThrottlingRateInByte, 'bytes/s, -1 unlimited'))],
      save: (f) => set('publishRate', { publishThrottlingRateInMsg: read(f, 'publishThrottlingRateInMsg'),
        publishThrottlingRateInByte: read(f, 'publishThrottlingRateInByte') }),
      remove: () => remove('publishRate') }),
    h(Section, { title: 'Dispatch rate (per topic)', testid: 'policy-dispatch-rate',
      fields: [field('Messages', num('dispatchThrottlingRateInMsg', disp?.dispatchThrottlingRateInMsg,
        'msgs per period')), field('Bytes', num('dispatchThrottlingRateInByte', disp?.dispatchThrottlingRateInByte,
        'bytes per period')), field('Period (s)', num('ratePeriodInSecond', disp?.ratePeriodInSecond ?? 1, 'seconds'))],
      save: (f) => set('dispatchRate', { dispatchThrottlingRateInMsg: read(f, 'dispatchThrottlingRateInMsg'),
        dispatchThrottlingRateInByte: read(f, 'dispatchThrottlingRateInByte'),
        ratePeriodInSecond: read(f, 'ratePeriodInSecond'), relativeToPublishRate: false }),
      remove: () => remove('dispatchRate') }),
    h(Section, { title: 'Limits', testid: 'policy-limits',
      fields: [field('Max producers per topic', num('maxProducersPerTopic', p.max_producers_per_topic, '0 no limit')),
        field('Max consumers per topic', num('maxConsumersPerTopic', p.max_consumers_per_topic, '0 no limit')),
        field('Max topics', num('maxTopicsPerNamespace', p.max_topics_per_namespace, '0 no limit'))],
      save: async (f) => {
        await set('maxProducersPerTopic', read(f, 'maxProducersPerTopic'));
        await set('maxConsumersPerTopic', read(f, 'maxConsumersPerTopic'));
        await set('maxTopicsPerNamespace', read(f, 'maxTopicsPerNamespace'));
      } }),
    h(Section, { title: 'Permissions', testid: 'policy-permissions',
      fields: [h(Permissions, { map: permissions }),
        field('Role', h('input', { name: 'role', placeholder: 'role', 'aria-label': 'role' })),
        h('div', { class: 'checks' }, ACTIONS.map((a) => h('label', {}, h('input', { type: 'checkbox', name: 'action',
          value: a, defaultChecked: a === 'produce' || a === 'consume', 'aria-label': a }), ' ', a)))],
      save: async (f) => {
        const checked = [...f.querySelectorAll<HTMLInputElement>('input[name="action"]:checked')].map((a) => a.value);
        await set(`permissions/${role(f)}`, checked);
        await reloadPermissions();
      },
      remove: async (f) => {
        await remove(`permissions/${role(f)}`);
        await reloadPermissions();
      } }));
}
