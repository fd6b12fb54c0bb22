// The console's shell: navigation, breadcrumbs and a client-side router over
// the History API. The server answers index.html for these paths too
// (src/admin/console.cc), so links can be shared and pages reloaded.
import './style.css';
import { h, link, navigate, replace } from './dom';
import { overviewPage, sampleOverview } from './pages/overview';
import { tenantsPage } from './pages/tenants';
import { tenantPage } from './pages/tenant';
import { namespacePage } from './pages/namespace';
import { topicPage } from './pages/topic';
import { monitoringPage } from './pages/monitoring';
import { sidebar } from './tree';

// A page draws itself into `root` and may return a function that stops its
// timers when the user leaves.
export type Page = (root: HTMLElement, params: string[], query: URLSearchParams) => (() => void) | void;

const routes: [RegExp, Page, string][] = [
  [/^\/$/, overviewPage, 'overview'],
  [/^\/tenants$/, tenantsPage, 'tenants'],
  [/^\/tenants\/([^/]+)$/, tenantPage, 'tenants'],
  [/^\/tenants\/([^/]+)\/([^/]+)$/, namespacePage, 'tenants'],
  [/^\/tenants\/([^/]+)\/([^/]+)\/(persistent|non-persistent)\/([^/]+)$/, topicPage, 'tenants'],
  [/^\/monitoring$/, monitoringPage, 'monitoring'],
];

const nav = h('nav', { class: 'nav' },
  link('/', 'Overview', { 'data-section': 'overview' }),
  link('/tenants', 'Tenants', { 'data-section': 'tenants' }),
  link('/monitoring', 'Metrics', { 'data-section': 'monitoring' }),
);
const main = h('main', { class: 'main' });
const app = document.getElementById('app')!;
replace(app,
  h('header', { class: 'topbar' },
    h('a', { href: '/', 'data-link': true, class: 'brand' }, h('span', { class: 'logo' }), 'Magnetar'),
    nav),
  h('div', { class: 'layout' }, sidebar(), main));

let stop: (() => void) | void;

function render() {
  if (stop) stop();
  stop = undefined;
  const path = location.pathname.replace(/\/+$/, '') || '/';
  main.replaceChildren();
  window.scrollTo(0, 0);
  for (const [re, page, section] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', a.dataset.section === section);
    stop = page(main, m.slice(1).map(decodeURIComponent), new URLSearchParams(location.search));
    return;
  }
  document.title = 'Not found · Magnetar';
  replace(main, h('h1', {}, 'Page not found'),
    h('p', { class: 'empty-state' }, `Nothing lives at ${path}. `, link('/', 'Back to the overview')));
}

document.addEventListener('click', (e) => {
  const a = (e.target as Element).closest('a[data-link]') as HTMLAnchorElement | null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href')!);
});
window.addEventListener('popstate', render);
render();
sampleOverview();
