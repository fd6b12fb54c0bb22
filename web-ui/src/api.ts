// Typed client of the REST API the console uses: Pulsar's /admin/v2 layout as
// Magnetar serves it (docs/admin-api.md) and /metrics. Every failure becomes
// an ApiError carrying the server's own reason.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export type Domain = 'persistent' | 'non-persistent';

export interface Overview {
  cluster: string;
  version: string;
  uptimeSeconds: number;
  tenants: number;
  namespaces: number;
  topics: number;
  loadedTopics: number;
  producers: number;
  consumers: number;
  subscriptions: number;
  msgRateIn: number;
  msgRateOut: number;
  msgThroughputIn: number;
  msgThroughputOut: number;
  msgInCounter: number;
  msgOutCounter: number;
  msgBacklog: number;
  storageSize: number;
  largestBacklogs: { topic: string; msgBacklog: number; storageSize: number }[];
}

// Who the console is signed in as (GET /admin/v2/me). Without
// authentication everyone is treated as a superuser.
export interface Me {
  role: string | null;
  authenticated: boolean;
  superuser: boolean;
  tenants: string[];  // the tenants this role administers
}

export interface TenantInfo {
  adminRoles: string[];
  allowedClusters: string[];
  // Where its configuration is edited, for a tenant that allows several
  // clusters; the others receive it and refuse edits.
  homeCluster?: string;
}

export interface PublisherStats {
  producerId?: number;
  producerName: string;
  msgRateIn: number;
  msgThroughputIn: number;
  address?: string;
  clientVersion?: string;
  protocol?: string;
}

export interface ConsumerStats {
  consumerName: string;
  msgRateOut: number;
  msgThroughputOut: number;
  availablePermits?: number;
  unackedMessages?: number;
  address?: string;
  clientVersion?: string;
  protocol?: string;
}

export interface SubscriptionStats {
  type?: string;
  msgBacklog: number;
  msgRateOut: number;
  msgThroughputOut: number;
  unackedMessages?: number;
  msgOutCounter?: number;
  isDurable?: boolean;
  // Its acknowledgements reach the other clusters (geo-replication).
  isReplicated?: boolean;
  consumers: ConsumerStats[];
}

// One remote cluster in a topic's stats (geo-replication).
export interface ReplicatorStats {
  msgRateIn: number;
  msgRateOut: number;
  replicationBacklog: number;
  connected: boolean;
  replicationDelayInSeconds: number;
  lastError?: string;
}

export interface TopicStats {
  msgRateIn: number;
  msgRateOut: number;
  msgThroughputIn: number;
  msgThroughputOut: number;
  msgInCounter?: number;
  msgOutCounter?: number;
  storageSize: number;
  backlogSize?: number;
  averageMsgSize?: number;
  publishers: PublisherStats[];
  subscriptions: Record<string, SubscriptionStats>;
  replication?: Record<string, ReplicatorStats>;
  metadata?: { partitions: number };
  partitions?: Record<string, TopicStats>;
}

export interface Retention {
  retentionTimeInMinutes: number;
  retentionSizeInMB: number;
  source?: string;  // ?applied=true on a topic: topic, namespace, kafka-default, pulsar-default
}
export interface BacklogQuota {
  limitSize?: number;
  limitTime?: number;
  policy?: string;
}
export interface Persistence {
  bookkeeperEnsemble: number;
  bookkeeperWriteQuorum: number;
  bookkeeperAckQuorum: number;
  managedLedgerMaxMarkDeleteRate?: number;
  fsyncMode?: string;
  fsyncIntervalMs?: number;
}
export interface PublishRate {
  publishThrottlingRateInMsg: number;
  publishThrottlingRateInByte: number;
}
export interface DispatchRate {
  dispatchThrottlingRateInMsg: number;
  dispatchThrottlingRateInByte: number;
  ratePeriodInSecond: number;
  relativeToPublishRate?: boolean;
}

// Pulsar's Policies document: only the fields the console reads are typed.
export interface Policies {
  retention_policies?: Retention | null;
  message_ttl_in_seconds?: number | null;
  backlog_quota_map?: Record<string, BacklogQuota>;
  persistence?: Persistence | null;
  deduplicationEnabled?: boolean | null;
  auth_policies?: { namespace_auth?: Record<string, string[]> };
  publishMaxMessageRate?: Record<string, PublishRate>;
  topicDispatchRate?: Record<string, DispatchRate>;
  max_producers_per_topic?: number | null;
  max_consumers_per_topic?: number | null;
  max_topics_per_namespace?: number | null;
  [key: string]: unknown;
}

export interface PeekedMessage {
  messageId: string;
  publishTime: string;
  producerName: string;
  key: string | null;
  properties: Record<string, string>;
  batchSize: number | null;
  payload: Uint8Array;
}

// One stage of a traced message (docs/tracing.md).
export interface TraceStage {
  stage: string;
  time: number;
  isoTime: string;
  latencyMs: number;
  producer?: string;
  subscription?: string;
  consumer?: string;
  consumerId?: number;
  clientAddress?: string;
  protocol?: string;
  redeliveryCount?: number;
  after?: string;
  through?: string;
  detail?: string;
}

export interface MessageTrace {
  messageId: string;
  batchIndex?: number;
  producer: string;
  receivedAt: string;
  traceparent: string | null;
  messages: { key: string | null; properties: Record<string, string> }[];
  stages: TraceStage[];
}

export interface TraceAnswer {
  topic: string;
  tracing: string;
  truncated: boolean;
  messages: MessageTrace[];
}

// The free-trial mode (a node started with --trial): what a visitor gets,
// and a sign-up's answer (GET /trial/config, POST /trial/signup).
export interface TenantLimits {
  publishRate: { publishThrottlingRateInMsg: number; publishThrottlingRateInByte: number };
  dispatchRate: { dispatchThrottlingRateInMsg: number; dispatchThrottlingRateInByte: number };
  maxProducers: number;
  maxConsumers: number;
  maxConnections: number;
  maxTopics: number;
  maxSubscriptions: number;
  maxNamespaces: number;
  maxMessageSize: number;
  storageQuotaBytes: number;
}

export interface ClientAddresses {
  pulsar?: string;
  http?: string;
  kafka?: string;
  amqp?: string;
}

export interface TrialConfig {
  trial: boolean;
  inviteRequired: boolean;
  expirySeconds: number;
  namespace: string;
  limits: TenantLimits;
  addresses: ClientAddresses;
}

export interface TrialSignup {
  tenant: string;
  namespace: string;  // "tenant/namespace"
  role: string;
  token: string;
  createdAt: string;
  expiresAt: string;
  expiresAtMs: number;
  limits: TenantLimits;
  addresses: ClientAddresses;
}

// The trial routes, served only by a node in trial mode (its tests check them).
export const TRIAL_ROUTES = [
  'GET /trial/config',
  'POST /trial/signup',
] as const;

// The routes this client calls, as the server's router spells them; the
// integration tests check each against the running binary.
export const ROUTES = [
  'GET /admin/v2/overview',
  'GET /admin/v2/tenants',
  'GET /admin/v2/me',
  'GET /admin/v2/tenants/{tenant}',
  'PUT /admin/v2/tenants/{tenant}',
  'POST /admin/v2/tenants/{tenant}',
  'GET /admin/v2/clusters',
  'GET /admin/v2/cluster/storage',
  'DELETE /admin/v2/tenants/{tenant}',
  'GET /admin/v2/namespaces/{tenant}',
  'PUT /admin/v2/namespaces/{tenant}/{namespace}',
  'GET /admin/v2/namespaces/{tenant}/{namespace}',
  'DELETE /admin/v2/namespaces/{tenant}/{namespace}',
  'GET /admin/v2/namespaces/{tenant}/{namespace}/topics',
  'POST /admin/v2/namespaces/{tenant}/{namespace}/{policy}',
  'DELETE /admin/v2/namespaces/{tenant}/{namespace}/{policy}',
  'GET /admin/v2/{domain}/{tenant}/{namespace}/partitioned',
  'PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}',
  'DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}',
  'PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions',
  'GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions',
  'DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions',
  'GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/stats',
  'GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitioned-stats',
  'PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload',
  'PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}',
  'DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}',
  'POST /admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}/skip_all',
  'POST /admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}/resetcursor/{timestamp}',
  'POST /admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}/expireMessages/{seconds}',
  'GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/subscription/{subscription}/position/{n}',
  'GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/trace',
  'POST /topics/{domain}/{tenant}/{namespace}/{topic}',
  'GET /metrics',
] as const;

const enc = encodeURIComponent;

async function reason(res: Response): Promise<string> {
  const text = await res.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body.reason === 'string') return body.reason;
  } catch {
    // not JSON: the text itself
  }
  return text.trim() || `${res.status} ${res.statusText}`;
}

// The token the console signs in with (a node with authentication on),
// kept for the browser tab's session only.
const TOKEN_KEY = 'magnetar.token';
export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(t: string | null): void {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}
// The signed-in role, once the shell asked (null before): pages show only
// what it may use.
let signedIn: Me | null = null;
export function me(): Me | null {
  return signedIn;
}
export async function loadMe(): Promise<Me> {
  signedIn = await api.me();
  return signedIn;
}
// True unless the role is known not to be a superuser.
export function isSuperuser(): boolean {
  return signedIn?.superuser ?? true;
}

// Fired on window when the server asks for credentials (HTTP 401).
export const LOGIN_EVENT = 'magnetar-login';

async function call(method: string, path: string, body?: unknown): Promise<Response> {
  let res: Response;
  const headers: Record<string, string> = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const t = token();
  if (t) headers['Authorization'] = `Bearer ${t}`;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, 'The server cannot be reached. Is magnetar running?');
  }
  if (res.status === 401) window.dispatchEvent(new CustomEvent(LOGIN_EVENT));
  if (!res.ok) throw new ApiError(res.status, await reason(res));
  return res;
}

async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await call(method, path, body);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

async function empty(method: string, path: string, body?: unknown): Promise<void> {
  await call(method, path, body);
}

export function topicPath(domain: Domain, tenant: string, ns: string, topic: string): string {
  return `/admin/v2/${domain}/${enc(tenant)}/${enc(ns)}/${enc(topic)}`;
}

// A member of the cluster, as GET /admin/v2/cluster/nodes shows it.
export interface ClusterNode {
  id: number;
  clusterAddress: string;
  raftRole: string;
  leader: boolean;
  alive: boolean;
  ownedBundles?: string[];
  brokerServiceUrl?: string;
  kafkaAddress?: string;
  httpUrl?: string;
  roles?: string[];
  zone?: string;
  storageState?: 'active' | 'decommissioned';
}

// What GET /admin/v2/cluster/load answers (a cluster member only).
export interface BrokerLoad {
  node: number;
  msgRateIn: number;
  msgRateOut: number;
  topics: number;
  cpu?: number;
  memoryBytes?: number;
}
export interface LoadDecision {
  at: number;
  bundle: string;
  from: number;
  to: number;
  reason: string;
  detail: string;
  done?: boolean;
  error?: string;
}
export interface ClusterLoad {
  brokers: BrokerLoad[];
  decisions: LoadDecision[];
}

// What GET /admin/v2/cluster/storage answers (a cluster member only).
export interface StorageNode {
  id: number;
  alive: boolean;
  zone: string;
  state: 'active' | 'draining' | 'drained';
  fragments: number;
  ledgers: number;
}
export interface HealingCopy {
  ledger: number;
  firstEntry: number;
  lastEntry: number;
  nextEntry: number;
  fromNode: number;
  toNode: number;
  copiedBytes: number;
  startedAt: number;
  bytesPerSecond: number;
}
export interface Healing {
  healer: number;
  updatedAt: number;
  underReplicatedFragments: number;
  healedFragments: number;
  healedBytes: number;
  rateLimitBytesPerSecond: number;
  copying: boolean;
  copy?: HealingCopy;
}
export interface ClusterStorage {
  ledgers: number;
  underReplicatedFragments: number;
  storageNodes: StorageNode[];
  healing: Healing | null;
}

// The trial's terms; null from a node that is not in trial mode.
async function trialConfig(): Promise<TrialConfig | null> {
  let res: Response;
  try {
    res = await fetch('/trial/config');
  } catch {
    return null;
  }
  return res.ok ? ((await res.json()) as TrialConfig) : null;
}

// Signs up for a trial. No token is sent: sign-up is open to visitors.
async function signUp(inviteCode: string): Promise<TrialSignup> {
  let res: Response;
  try {
    res = await fetch('/trial/signup', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(inviteCode ? { inviteCode } : {}) });
  } catch {
    throw new ApiError(0, 'The server cannot be reached.');
  }
  if (!res.ok) {
    const retry = res.headers.get('Retry-After');
    const why = await reason(res);
    throw new ApiError(res.status, retry ? `${why} (Retry-After: ${retry} s)` : why);
  }
  return (await res.json()) as TrialSignup;
}

// The visitor's sign-up, kept for this browser tab like the token.
const TRIAL_KEY = 'magnetar.trial';
export function savedTrial(): TrialSignup | null {
  const text = sessionStorage.getItem(TRIAL_KEY);
  if (!text) return null;
  try {
    return JSON.parse(text) as TrialSignup;
  } catch {
    return null;
  }
}
export function saveTrial(t: TrialSignup | null): void {
  if (t) sessionStorage.setItem(TRIAL_KEY, JSON.stringify(t));
  else sessionStorage.removeItem(TRIAL_KEY);
}

export const api = {
  trialConfig,
  signUp,
  overview: () => json<Overview>('GET', '/admin/v2/overview'),
  nodes: () => json<ClusterNode[]>('GET', '/admin/v2/cluster/nodes'),
  clusterLoad: () => json<ClusterLoad>('GET', '/admin/v2/cluster/load'),
  clusterStorage: () => json<ClusterStorage>('GET', '/admin/v2/cluster/storage'),

  me: () => json<Me>('GET', '/admin/v2/me'),
  tenants: () => json<string[]>('GET', '/admin/v2/tenants'),
  tenant: (t: string) => json<TenantInfo>('GET', `/admin/v2/tenants/${enc(t)}`),
  createTenant: (t: string) => empty('PUT', `/admin/v2/tenants/${enc(t)}`, {}),
  deleteTenant: (t: string) => empty('DELETE', `/admin/v2/tenants/${enc(t)}`),
  updateTenant: (t: string, info: TenantInfo) => empty('POST', `/admin/v2/tenants/${enc(t)}`, info),
  clusters: () => json<string[]>('GET', '/admin/v2/clusters'),

  namespaces: (t: string) => json<string[]>('GET', `/admin/v2/namespaces/${enc(t)}`),
  createNamespace: (t: string, ns: string) => empty('PUT', `/admin/v2/namespaces/${enc(t)}/${enc(ns)}`),
  deleteNamespace: (t: string, ns: string) => empty('DELETE', `/admin/v2/namespaces/${enc(t)}/${enc(ns)}`),
  policies: (t: string, ns: string) => json<Policies>('GET', `/admin/v2/namespaces/${enc(t)}/${enc(ns)}`),
  setPolicy: (t: string, ns: string, policy: string, body: unknown) =>
    empty('POST', `/admin/v2/namespaces/${enc(t)}/${enc(ns)}/${policy}`, body),
  removePolicy: (t: string, ns: string, policy: string) =>
    empty('DELETE', `/admin/v2/namespaces/${enc(t)}/${enc(ns)}/${policy}`),
  topics: (t: string, ns: string) => json<string[]>('GET', `/admin/v2/namespaces/${enc(t)}/${enc(ns)}/topics`),
  partitionedTopics: (domain: Domain, t: string, ns: string) =>
    json<string[]>('GET', `/admin/v2/${domain}/${enc(t)}/${enc(ns)}/partitioned`),

  createTopic: (domain: Domain, t: string, ns: string, topic: string, partitions: number) =>
    partitions > 0
      ? empty('PUT', topicPath(domain, t, ns, topic) + '/partitions', partitions)
      : empty('PUT', topicPath(domain, t, ns, topic)),
  deleteTopic: (domain: Domain, t: string, ns: string, topic: string, partitioned: boolean) =>
    empty('DELETE', topicPath(domain, t, ns, topic) + (partitioned ? '/partitions' : '?force=true')),
  retentionInEffect: (domain: Domain, t: string, ns: string, topic: string) =>
    json<Retention>('GET', topicPath(domain, t, ns, topic) + '/retention?applied=true'),
  partitions: (domain: Domain, t: string, ns: string, topic: string) =>
    json<{ partitions: number }>('GET', topicPath(domain, t, ns, topic) + '/partitions'),
  stats: (domain: Domain, t: string, ns: string, topic: string) =>
    json<TopicStats>('GET', topicPath(domain, t, ns, topic) + '/stats'),
  partitionedStats: (domain: Domain, t: string, ns: string, topic: string) =>
    json<TopicStats>('GET', topicPath(domain, t, ns, topic) + '/partitioned-stats?perPartition=true'),
  unload: (domain: Domain, t: string, ns: string, topic: string) =>
    empty('PUT', topicPath(domain, t, ns, topic) + '/unload'),

  createSubscription: (domain: Domain, t: string, ns: string, topic: string, sub: string, from: string) =>
    empty('PUT', topicPath(domain, t, ns, topic) + `/subscription/${enc(sub)}?messageId=${enc(from)}`),
  deleteSubscription: (domain: Domain, t: string, ns: string, topic: string, sub: string) =>
    empty('DELETE', topicPath(domain, t, ns, topic) + `/subscription/${enc(sub)}?force=true`),
  skipAll: (domain: Domain, t: string, ns: string, topic: string, sub: string) =>
    empty('POST', topicPath(domain, t, ns, topic) + `/subscription/${enc(sub)}/skip_all`),
  resetCursor: (domain: Domain, t: string, ns: string, topic: string, sub: string, timestampMs: number) =>
    empty('POST', topicPath(domain, t, ns, topic) + `/subscription/${enc(sub)}/resetcursor/${timestampMs}`),
  expireMessages: (domain: Domain, t: string, ns: string, topic: string, sub: string, seconds: number) =>
    empty('POST', topicPath(domain, t, ns, topic) + `/subscription/${enc(sub)}/expireMessages/${seconds}`),

  // The n-th unacknowledged message of the subscription (from 1), or null
  // when there is none.
  peek: (domain: Domain, t: string, ns: string, topic: string, sub: string, n: number) =>
    readMessage(topicPath(domain, t, ns, topic) + `/subscription/${enc(sub)}/position/${n}`),
  // One message by its id ("ledger:entry"), or null when there is none.
  messageById: (domain: Domain, t: string, ns: string, topic: string, ledger: number, entry: number) =>
    readMessage(topicPath(domain, t, ns, topic) + `/ledger/${ledger}/entry/${entry}`),

  // Where traced messages went: by key, message id ("ledger:entry") or
  // property ("name=value"); a 404 (its reason says why) when none was traced.
  trace: (domain: Domain, t: string, ns: string, topic: string, by: 'key' | 'messageId' | 'property', value: string) =>
    json<TraceAnswer>('GET', topicPath(domain, t, ns, topic) + `/trace?${by}=${enc(value)}`),

  // Pulsar's REST producer: one message; answers its id ("ledger:entry:-1").
  async produce(domain: Domain, t: string, ns: string, topic: string, payload: string, key: string,
    properties: Record<string, string>) {
    const answer = await json<{ messagePublishResults: { messageId: string; errorCode: number; error?: string }[] }>(
      'POST', `/topics/${domain}/${enc(t)}/${enc(ns)}/${enc(topic)}`,
      { messages: [{ payload, key: key || undefined, properties }] });
    const result = answer.messagePublishResults[0];
    if (result.errorCode !== 0) throw new ApiError(500, result.error ?? 'the message was not stored');
    return result.messageId;
  },

  metricsText: async () => (await call('GET', '/metrics')).text(),
};

// A message as peek and getMessageById answer it: the payload as the body,
// the metadata in X-Pulsar-* headers; null for "Message not found".
async function readMessage(path: string): Promise<PeekedMessage | null> {
  let res: Response;
  try {
    res = await call('GET', path);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && e.message === 'Message not found') return null;
    throw e;
  }
  const h = res.headers;
  let properties: Record<string, string> = {};
  try {
    properties = JSON.parse(h.get('X-Pulsar-PROPERTY') ?? '{}');
  } catch {
    properties = {};
  }
  const batch = h.get('X-Pulsar-num-batch-message');
  const message: PeekedMessage = {
    messageId: h.get('X-Pulsar-Message-ID') ?? '',
    publishTime: h.get('X-Pulsar-publish-time') ?? '',
    producerName: h.get('X-Pulsar-producer-name') ?? '',
    key: h.get('X-Pulsar-Key'),
    properties,
    batchSize: batch === null ? null : Number(batch),
    payload: new Uint8Array(await res.arrayBuffer()),
  };
  return message;
}
