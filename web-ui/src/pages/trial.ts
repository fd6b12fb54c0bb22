// The free-trial mode (a node started with --trial): the sign-up page a
// visitor lands on, and their trial page: the token (shown once by the
// server, kept in this tab, offered as a download), copy-paste quick starts
// for Pulsar, Kafka and AMQP with their own token and addresses filled in,
// the expiry, and their topics, live.
import { ComponentChildren, Fragment, h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, ClientAddresses, saveTrial, savedTrial, setToken, TopicStats, TrialConfig,
  TrialSignup } from '../api';
import { card, errorText, fmtBytes, fmtDuration, fmtNumber, link, REFRESH_MS, usePoll } from '../dom';
import { DataTable } from '../table';
import { namespaceHref, parseTopic, topicPageHref } from './links';

function limitText(n: number, unit = ''): string {
  return n < 0 ? 'no limit' : `${fmtNumber(n)}${unit}`;
}

function Terms({ config }: { config: TrialConfig }) {
  const l = config.limits;
  return h('ul', { class: 'trial-terms' },
    h('li', {}, `A tenant of your own with one namespace, for ${fmtDuration(config.expirySeconds)}; `,
      'then it is deleted with everything in it.'),
    h('li', {}, `Up to ${limitText(l.maxTopics)} topics, ${fmtBytes(l.storageQuotaBytes)} stored, `,
      `${limitText(l.publishRate.publishThrottlingRateInMsg)} messages/s published, `,
      `messages up to ${fmtBytes(l.maxMessageSize)}, ${limitText(l.maxConnections)} connections.`),
    h('li', {}, 'Pulsar, Kafka and AMQP clients, all with one token.'));
}

export function TrialSignupPage({ config, onSignedUp, onSignIn }:
  { config: TrialConfig; onSignedUp: (t: TrialSignup) => void; onSignIn: () => void }) {
  const [code, setCode] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    document.title = 'Try Magnetar';
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (config.inviteRequired && !code.trim()) return setError('Enter your invite code first.');
    setBusy(true);
    try {
      const signup = await api.signUp(code.trim());
      setError('');
      onSignedUp(signup);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  return h('div', { class: 'login' },
    h('form', { class: 'login-card trial-card', onSubmit: submit, 'data-testid': 'trial-signup-form' },
      h('h1', {}, h('span', { class: 'logo' }), 'Try Magnetar'),
      h('p', {}, 'One broker for Pulsar, Kafka and AMQP clients. Sign up and get a sandbox in a second: ',
        'no e-mail, no card.'),
      h(Terms, { config }),
      config.inviteRequired
        ? h('label', {}, 'Invite code', h('input', { 'data-testid': 'trial-invite-code', value: code,
          autocomplete: 'off', onInput: (e: Event) => setCode((e.target as HTMLInputElement).value) }))
        : null,
      error ? h('p', { class: 'error', 'data-testid': 'trial-signup-error', role: 'alert' }, error) : null,
      h('button', { type: 'submit', disabled: busy, 'data-testid': 'trial-signup' },
        busy ? 'Making your sandbox…' : 'Start my trial'),
      h('p', { class: 'small muted' }, 'Have a token already? ',
        h('a', { href: '#', 'data-testid': 'trial-sign-in', onClick: (e: Event) => { e.preventDefault(); onSignIn(); } },
          'Sign in with it'), '.')));
}

// Signs the console in with a fresh sign-up's token and keeps the sign-up.
export function adoptSignup(t: TrialSignup) {
  setToken(t.token);
  saveTrial(t);
}

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  URL.revokeObjectURL(url);
}

function CopyBlock({ text, testid }: { text: string; testid: string }) {
  const [copied, setCopied] = useState(false);
  return h('div', { class: 'copy-block' },
    h('pre', { 'data-testid': testid }, text),
    h('button', { type: 'button', class: 'small', onClick: async () => {
      try {
        await navigator.clipboard.writeText(text);
        setCopied(true);
      } catch {
        setCopied(false);
      }
    } }, copied ? 'Copied' : 'Copy'));
}

// The commands and code a visitor pastes, their values filled in.
export function quickStarts(t: TrialSignup): { id: string; title: string; blocks: [string, string][] }[] {
  const a: ClientAddresses = t.addresses;
  const topic = `persistent://${t.namespace}/hello`;
  const pulsar = a.pulsar ?? 'pulsar://HOST:6650';
  const kafka = a.kafka ?? 'HOST:9092';
  const amqp = new URL((a.amqp ?? 'amqp://HOST:5672').replace(/^amqp:/, 'http:'));
  const amqpPort = amqp.port || '5672';
  const sasl = `-X security.protocol=SASL_PLAINTEXT -X sasl.mechanism=PLAIN \\\n  ` +
    `-X sasl.username=${t.namespace} -X sasl.password='${t.token}'`;
  return [
    { id: 'pulsar', title: 'Pulsar', blocks: [
      ['The magnetar CLI (its own Pulsar client), with the token file you downloaded',
        `magnetar consume ${topic} -s my-sub -n 1 --url ${pulsar} --token-file magnetar-trial-token.txt &\n` +
        `magnetar produce ${topic} -m 'hello, magnetar' --url ${pulsar} --token-file magnetar-trial-token.txt`],
      ['Python (pip install pulsar-client)',
        'import pulsar\n' +
        `client = pulsar.Client('${pulsar}',\n` +
        `                       authentication=pulsar.AuthenticationToken('${t.token}'))\n` +
        `consumer = client.subscribe('${topic}', 'my-sub')\n` +
        `client.create_producer('${topic}').send(b'hello, magnetar')\n` +
        'msg = consumer.receive()\nprint(msg.data())\nconsumer.acknowledge(msg)\nclient.close()'],
    ] },
    { id: 'kafka', title: 'Kafka', blocks: [
      ['kcat: SASL/PLAIN, the namespace as user name, the token as password',
        `echo 'hello, magnetar' | kcat -b ${kafka} ${sasl} -P -t hello\n` +
        `kcat -b ${kafka} ${sasl} -C -t hello -o beginning -e`],
      ['Python (confluent-kafka)',
        'from confluent_kafka import Consumer, Producer\n' +
        `conf = {'bootstrap.servers': '${kafka}', 'security.protocol': 'SASL_PLAINTEXT',\n` +
        `        'sasl.mechanism': 'PLAIN', 'sasl.username': '${t.namespace}',\n` +
        `        'sasl.password': '${t.token}'}\n` +
        "p = Producer(conf)\np.produce('hello', b'hello, magnetar')\np.flush()\n" +
        "c = Consumer({**conf, 'group.id': 'my-group', 'auto.offset.reset': 'earliest'})\n" +
        "c.subscribe(['hello'])\nprint(c.poll(10).value())\nc.close()"],
    ] },
    { id: 'amqp', title: 'AMQP 0-9-1', blocks: [
      ['Python (pika): PLAIN with the token as password, the namespace as virtual host',
        'import pika\n' +
        `creds = pika.PlainCredentials('trial', '${t.token}')\n` +
        `conn = pika.BlockingConnection(pika.ConnectionParameters('${amqp.hostname}', ${amqpPort},\n` +
        `                                                         '${t.namespace}', creds))\n` +
        "ch = conn.channel()\nch.queue_declare('hello', durable=True)\n" +
        "ch.basic_publish('', 'hello', b'hello, magnetar')\n" +
        "print(ch.basic_get('hello', auto_ack=True)[2])\nconn.close()"],
    ] },
  ];
}

interface TopicRow {
  name: string;
  stats: TopicStats | null;
}

// The visitor's topics with their rates, backlog and size, every few seconds.
function LiveTopics({ trial }: { trial: TrialSignup }) {
  const [tenant, ns] = trial.namespace.split('/');
  const [rows, setRows] = useState<TopicRow[] | null>(null);
  const [error, setError] = useState('');
  usePoll(REFRESH_MS, async () => {
    try {
      const names = await api.topics(tenant, ns);
      const loaded = await Promise.all(names.map(async (name) => {
        const p = parseTopic(name);
        const stats = p ? await api.stats(p.domain, tenant, ns, p.topic).catch(() => null) : null;
        return { name, stats };
      }));
      setRows(loaded);
      setError('');
    } catch (e) {
      setError(errorText(e));
    }
  });
  const backlog = (s: TopicStats | null) =>
    s ? Object.values(s.subscriptions ?? {}).reduce((n, sub) => n + (sub.msgBacklog ?? 0), 0) : 0;
  const columns = [
    { title: 'Topic', value: (r: TopicRow) => r.name, render: (r: TopicRow) => {
      const p = parseTopic(r.name);
      return p ? link(topicPageHref(p.domain, tenant, ns, p.topic), p.topic) : r.name;
    } },
    { title: 'In (msg/s)', value: (r: TopicRow) => r.stats?.msgRateIn ?? 0,
      render: (r: TopicRow) => fmtNumber(r.stats?.msgRateIn ?? 0), numeric: true },
    { title: 'Out (msg/s)', value: (r: TopicRow) => r.stats?.msgRateOut ?? 0,
      render: (r: TopicRow) => fmtNumber(r.stats?.msgRateOut ?? 0), numeric: true },
    { title: 'Backlog', value: (r: TopicRow) => backlog(r.stats), numeric: true },
    { title: 'Stored', value: (r: TopicRow) => r.stats?.storageSize ?? 0,
      render: (r: TopicRow) => fmtBytes(r.stats?.storageSize ?? 0), numeric: true },
  ];
  return h(Fragment, {},
    error ? h('div', { class: 'notice error', role: 'alert' }, error) : null,
    rows === null ? h('p', { class: 'muted' }, 'Loading…')
      : h(DataTable<TopicRow>, { rows, columns, rowKey: (r: TopicRow) => r.name, testid: 'trial-topics',
        empty: 'No topics yet: run a quick start and your topic shows up here.' }));
}

function Countdown({ at }: { at: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(timer);
  }, []);
  const left = Math.max(0, (at - now) / 1000);
  return h('span', { 'data-testid': 'trial-time-left' }, left > 0 ? fmtDuration(left) : 'expired');
}

export function TrialPage() {
  const trial = savedTrial();
  const [tab, setTab] = useState('pulsar');
  useEffect(() => {
    document.title = 'Your trial · Magnetar';
  }, []);
  if (!trial) {
    return h('div', {}, h('h1', {}, 'Your trial'),
      h('p', { class: 'empty-state' }, 'This browser tab has no trial sign-up. Sign out and start a trial, or ',
        link('/tenants', 'see your tenants'), '.'));
  }
  const [tenant, ns] = trial.namespace.split('/');
  const starts = quickStarts(trial);
  const current = starts.find((s) => s.id === tab) ?? starts[0];
  const section = (title: string, ...body: ComponentChildren[]) => h('section', { class: 'panel' }, h('h2', {}, title), ...body);
  return h('div', { class: 'trial' },
    h('h1', {}, 'Your trial'),
    h('div', { class: 'cards' },
      card('Tenant', trial.tenant, 'trial-tenant'),
      card('Namespace', trial.namespace, 'trial-namespace'),
      h('div', { class: 'card' }, h('div', { class: 'card-label' }, 'Time left'),
        h('div', { class: 'card-value' }, h(Countdown, { at: trial.expiresAtMs }))),
      card('Expires', new Date(trial.expiresAtMs).toLocaleString(), 'trial-expires')),
    section('Your token',
      h('p', {}, 'It is shown only now: download it. Every client uses it (Pulsar token, Kafka SASL/PLAIN password, ',
        'AMQP password), and so does this console.'),
      h('pre', { class: 'trial-token', 'data-testid': 'trial-token' }, trial.token),
      h('button', { type: 'button', 'data-testid': 'trial-download-token',
        onClick: () => download('magnetar-trial-token.txt', trial.token + '\n') }, 'Download token')),
    section('Quick start',
      h('div', { class: 'tabs', role: 'tablist' }, ...starts.map((s) =>
        h('a', { href: '#', role: 'tab', class: s.id === current.id ? 'tab active' : 'tab',
          'data-testid': `quickstart-tab-${s.id}`,
          onClick: (e: Event) => { e.preventDefault(); setTab(s.id); } }, s.title))),
      ...current.blocks.map(([caption, text], i) => h('div', { class: 'quickstart' },
        h('h3', {}, caption), h(CopyBlock, { text, testid: `quickstart-${current.id}-${i}` }))),
      h('p', { class: 'small muted' }, 'Addresses: ',
        Object.entries(trial.addresses).map(([k, v]) => `${k} ${v}`).join(' · '))),
    section('Your topics',
      h(LiveTopics, { trial }),
      h('p', { class: 'small' }, link(namespaceHref(tenant, ns), 'Manage the namespace'),
        ' (topics, subscriptions, policies, messages).')));
}
