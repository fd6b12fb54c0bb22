// A namespace's policies, one section per policy, each saved with its own
// POST so that the server's validation error appears next to it.
import { api, Policies } from '../api';
import { busy, dangerButton, h, notice, replace } from '../dom';

type Input = HTMLInputElement | HTMLSelectElement;

function num(name: string, value: number | null | undefined, hint = ''): HTMLInputElement {
  return h('input', { name, type: 'number', value: value ?? '', placeholder: hint, 'aria-label': name });
}

// The number typed, or null when the field is empty (the server says what it
// makes of that).
function read(input: Input): number | null {
  return input.value.trim() === '' ? null : Number(input.value);
}

function field(label: string, input: Input, help = '') {
  return h('label', { class: 'field' }, h('span', {}, label), input, help ? h('small', {}, help) : null);
}

function section(title: string, testid: string, fields: Node[], save: () => Promise<void>,
  remove?: () => Promise<void>) {
  const n = notice();
  const saveButton = h('button', { type: 'submit' }, 'Save');
  const form = h('form', { class: 'policy', 'data-testid': testid }, h('h3', {}, title), h('div', { class: 'fields' },
    fields), h('div', { class: 'actions' }, saveButton,
    remove ? dangerButton('Remove', n, async () => {
      await remove();
      n.ok('Removed.');
    }) : null), n.el);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    busy(saveButton, n, async () => {
      await save();
      n.ok('Saved.');
    });
  });
  return form;
}

function first<T>(map: Record<string, T> | undefined): T | undefined {
  return map ? Object.values(map)[0] : undefined;
}

export function policiesPanel(tenant: string, ns: string): HTMLElement {
  const root = h('div', { class: 'policies' });
  const status = notice();
  root.append(status.el);
  const set = (policy: string, body: unknown) => api.setPolicy(tenant, ns, policy, body);
  const remove = (policy: string) => api.removePolicy(tenant, ns, policy);

  api.policies(tenant, ns).then((p: Policies) => {
    const retention = p.retention_policies ?? undefined;
    const rTime = num('retentionTimeInMinutes', retention?.retentionTimeInMinutes, 'minutes, -1 unlimited');
    const rSize = num('retentionSizeInMB', retention?.retentionSizeInMB, 'MB, -1 unlimited');

    const ttl = num('messageTTL', p.message_ttl_in_seconds, 'seconds');

    const quota = p.backlog_quota_map?.destination_storage;
    const qSize = num('limitSize', quota?.limitSize, 'bytes, -1 unlimited');
    const qTime = num('limitTime', quota?.limitTime, 'seconds, -1 unlimited');
    const qPolicy = h('select', { name: 'policy', 'aria-label': 'policy' },
      ['producer_request_hold', 'producer_exception', 'consumer_backlog_eviction'].map((v) =>
        h('option', { value: v, selected: quota?.policy === v }, v)));

    const per = p.persistence ?? undefined;
    const ensemble = num('bookkeeperEnsemble', per?.bookkeeperEnsemble ?? 1);
    const writeQuorum = num('bookkeeperWriteQuorum', per?.bookkeeperWriteQuorum ?? 1);
    const ackQuorum = num('bookkeeperAckQuorum', per?.bookkeeperAckQuorum ?? 1);
    const fsyncMode = h('select', { name: 'fsyncMode', 'aria-label': 'fsyncMode' },
      ['always', 'interval', 'never'].map((v) => h('option', { value: v, selected: (per?.fsyncMode ?? 'always') === v },
        v)));
    const fsyncInterval = num('fsyncIntervalMs', per?.fsyncIntervalMs ?? 0, 'ms, for interval');

    const dedup = h('select', { name: 'deduplication', 'aria-label': 'deduplication' },
      h('option', { value: 'true', selected: p.deduplicationEnabled === true }, 'enabled'),
      h('option', { value: 'false', selected: p.deduplicationEnabled !== true }, 'disabled'));

    const pub = first(p.publishMaxMessageRate);
    const pubMsg = num('publishThrottlingRateInMsg', pub?.publishThrottlingRateInMsg, 'msgs/s, -1 unlimited');
    const pubByte = num('publishThrottlingRateInByte', pub?.publishThrottlingRateInByte, 'bytes/s, -1 unlimited');
    const disp = first(p.topicDispatchRate);
    const dispMsg = num('dispatchThrottlingRateInMsg', disp?.dispatchThrottlingRateInMsg, 'msgs per period');
    const dispByte = num('dispatchThrottlingRateInByte', disp?.dispatchThrottlingRateInByte, 'bytes per period');
    const dispPeriod = num('ratePeriodInSecond', disp?.ratePeriodInSecond ?? 1, 'seconds');

    const maxProducers = num('maxProducersPerTopic', p.max_producers_per_topic, '0 no limit');
    const maxConsumers = num('maxConsumersPerTopic', p.max_consumers_per_topic, '0 no limit');
    const maxTopics = num('maxTopicsPerNamespace', p.max_topics_per_namespace, '0 no limit');

    const perms = h('div', {});
    const showPermissions = (map: Record<string, string[]> | undefined) => {
      const entries = Object.entries(map ?? {});
      replace(perms, entries.length === 0 ? h('p', { class: 'muted' }, 'No role has permissions here.')
        : h('ul', {}, entries.map(([role, actions]) => h('li', {}, h('b', {}, role), `: ${actions.join(', ')}`))));
    };
    showPermissions(p.auth_policies?.namespace_auth);
    const role = h('input', { name: 'role', placeholder: 'role', 'aria-label': 'role' });
    const actions = ['produce', 'consume', 'functions', 'sources', 'sinks', 'packages'].map((a) =>
      h('input', { type: 'checkbox', value: a, checked: a === 'produce' || a === 'consume', 'aria-label': a }));
    const reloadPermissions = async () => showPermissions((await api.policies(tenant, ns)).auth_policies?.namespace_auth);

    root.append(
      section('Retention', 'policy-retention', [field('Time (minutes)', rTime), field('Size (MB)', rSize)],
        () => set('retention', { retentionTimeInMinutes: read(rTime), retentionSizeInMB: read(rSize) }),
        () => remove('retention')),
      section('Message TTL', 'policy-ttl', [field('TTL (seconds)', ttl)], () => set('messageTTL', read(ttl)),
        () => remove('messageTTL')),
      section('Backlog quota (storage)', 'policy-backlog-quota',
        [field('Limit size (bytes)', qSize), field('Limit time (s)', qTime), field('When exceeded', qPolicy)],
        () => set('backlogQuota?backlogQuotaType=destination_storage',
          { limitSize: read(qSize), limitTime: read(qTime), policy: qPolicy.value }),
        () => remove('backlogQuota?backlogQuotaType=destination_storage')),
      section('Persistence', 'policy-persistence',
        [field('Ensemble', ensemble), field('Write quorum', writeQuorum), field('Ack quorum', ackQuorum),
          field('fsync', fsyncMode, 'always: every write is on disk before the ack'), field('fsync interval',
            fsyncInterval)],
        () => set('persistence', {
          bookkeeperEnsemble: read(ensemble), bookkeeperWriteQuorum: read(writeQuorum),
          bookkeeperAckQuorum: read(ackQuorum), managedLedgerMaxMarkDeleteRate: per?.managedLedgerMaxMarkDeleteRate ?? 0,
          fsyncMode: fsyncMode.value, fsyncIntervalMs: read(fsyncInterval) ?? 0,
        }), () => remove('persistence')),
      section('Deduplication', 'policy-deduplication', [field('Deduplication', dedup)],
        () => set('deduplication', dedup.value === 'true'), () => remove('deduplication')),
      section('Publish rate (per topic)', 'policy-publish-rate',
        [field('Messages/s', pubMsg), field('Bytes/s', pubByte)],
        () => set('publishRate', { publishThrottlingRateInMsg: read(pubMsg), publishThrottlingRateInByte: read(pubByte) }),
        () => remove('publishRate')),
      section('Dispatch rate (per topic)', 'policy-dispatch-rate',
        [field('Messages', dispMsg), field('Bytes', dispByte), field('Period (s)', dispPeriod)],
        () => set('dispatchRate', { dispatchThrottlingRateInMsg: read(dispMsg),
          dispatchThrottlingRateInByte: read(dispByte), ratePeriodInSecond: read(dispPeriod),
          relativeToPublishRate: false }),
        () => remove('dispatchRate')),
      section('Limits', 'policy-limits', [field('Max producers per topic', maxProducers),
        field('Max consumers per topic', maxConsumers), field('Max topics', maxTopics)], async () => {
        await set('maxProducersPerTopic', read(maxProducers));
        await set('maxConsumersPerTopic', read(maxConsumers));
        await set('maxTopicsPerNamespace', read(maxTopics));
      }),
      section('Permissions', 'policy-permissions', [perms, field('Role', role),
        h('div', { class: 'checks' }, actions.map((a) => h('label', {}, a, ' ', a.value)))], async () => {
        await set(`permissions/${encodeURIComponent(role.value.trim())}`, actions.filter((a) => a.checked).map((a) =>
          a.value));
        await reloadPermissions();
      }, async () => {
        await remove(`permissions/${encodeURIComponent(role.value.trim())}`);
        await reloadPermissions();
      }),
    );
  }).catch((e) => status.error(e));
  return root;
}
