// Where the console shows a tenant, namespace or topic.
import type { Domain } from '../api';

const enc = encodeURIComponent;

export const tenantHref = (t: string) => `/tenants/${enc(t)}`;
export const namespaceHref = (t: string, ns: string) => `/tenants/${enc(t)}/${enc(ns)}`;

// "persistent://t/ns/topic" -> "/tenants/t/ns/persistent/topic"; null when
// the name is not a full topic name.
export function topicHref(full: string): string | null {
  const parsed = parseTopic(full);
  return parsed ? topicPageHref(parsed.domain, parsed.tenant, parsed.ns, parsed.topic) : null;
}

export const topicPageHref = (domain: Domain, t: string, ns: string, topic: string) =>
  `/tenants/${enc(t)}/${enc(ns)}/${domain}/${enc(topic)}`;

export function parseTopic(full: string): { domain: Domain; tenant: string; ns: string; topic: string } | null {
  const m = /^(persistent|non-persistent):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(full);
  return m ? { domain: m[1] as Domain, tenant: m[2], ns: m[3], topic: m[4] } : null;
}
