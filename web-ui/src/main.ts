// The console's shell: navigation, breadcrumbs and a client-side router over
// the History API. The server answers index.html for these paths too
// (src/admin/console.cc), so links can be shared and pages reloaded.
import './style.css';
import { Fragment, FunctionComponent, h, render, VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { link, navigate } from './dom';
import { OverviewPage, sampleOverview } from './pages/overview';
import { TenantsPage } from './pages/tenants';
import { TenantPage } from './pages/tenant';
import { NamespacePage } from './pages/namespace';
import { TopicPage } from './pages/topic';
import { MonitoringPage } from './pages/monitoring';
import { NodesPage } from './pages/nodes';
import { Sidebar } from './tree';
import { LoginPage } from './pages/login';
import { adoptSignup, TrialPage, TrialSignupPage } from './pages/trial';
import { api, LOGIN_EVENT, loadMe, Me, saveTrial, savedTrial, setToken, token, TrialConfig } from './api';

// A page gets the parts of its path and the query string; it is mounted
// afresh for every location, and its effects stop its timers when it goes.
export interface PageProps {
  params: string[];
  query: URLSearchParams;
}

const routes: [RegExp, FunctionComponent<PageProps>, string][] = [
  [/^\/$/, OverviewPage, 'overview'],
  [/^\/tenants$/, TenantsPage, 'tenants'],
  [/^\/tenants\/([^/]+)$/, TenantPage, 'tenants'],
  [/^\/tenants\/([^/]+)\/([^/]+)$/, NamespacePage, 'tenants'],
  [/^\/tenants\/([^/]+)\/([^/]+)\/(persistent|non-persistent)\/([^/]+)$/, TopicPage, 'tenants'],
  [/^\/monitoring$/, MonitoringPage, 'monitoring'],
  [/^\/nodes$/, NodesPage, 'nodes'],
  [/^\/trial$/, TrialPage, 'trial'],
];

function NotFound({ path }: { path: string }) {
  useEffect(() => {
    document.title = 'Not found · Magnetar';
  }, []);
  return h('div', {}, h('h1', {}, 'Page not found'),
    h('p', { class: 'empty-state' }, `Nothing lives at ${path}. `, link('/', 'Back to the overview')));
}

function App() {
  // Every navigation mounts the page afresh, as a reload would.
  const [visit, setVisit] = useState(0);
  // The server asked for a token (authentication is on): sign in first.
  const [signIn, setSignIn] = useState(false);
  // Who is signed in; pages show only what that role may use.
  const [who, setWho] = useState<Me | null>(null);
  // The trial's terms on a node in trial mode; null on any other node,
  // undefined until known.
  const [trial, setTrial] = useState<TrialConfig | null | undefined>(undefined);
  // A visitor on a trial node chose to sign in with a token instead.
  const [tokenChosen, setTokenChosen] = useState(false);
  useEffect(() => {
    api.trialConfig().then(setTrial);
  }, []);
  const signUpFirst = !!trial && !token() && !tokenChosen;
  useEffect(() => {
    // A 401 opens the sign-in page (or, on a trial node, the sign-up page).
    if (trial !== undefined && !signUpFirst && !signIn && who === null) loadMe().then(setWho, () => {});
  }, [signIn, who, trial, signUpFirst]);
  useEffect(() => {
    const onPop = () => {
      setVisit((v) => v + 1);
      window.scrollTo(0, 0);
    };
    const onLogin = () => setSignIn(true);
    window.addEventListener('popstate', onPop);
    window.addEventListener(LOGIN_EVENT, onLogin);
    return () => {
      window.removeEventListener('popstate', onPop);
      window.removeEventListener(LOGIN_EVENT, onLogin);
    };
  }, []);
  if (trial === undefined) return h('div', { class: 'main', 'aria-busy': 'true' }, 'Loading…');
  // On a trial node a visitor without a token lands on the sign-up page.
  if (signUpFirst) {
    return h(TrialSignupPage, {
      config: trial,
      onSignedUp: (t) => {
        adoptSignup(t);
        setWho(null);
        setSignIn(false);
        history.pushState(null, '', '/trial');
        setVisit((v) => v + 1);
      },
      onSignIn: () => {
        setTokenChosen(true);
        setSignIn(true);
      },
    });
  }
  if (signIn) {
    return h(LoginPage, {
      onSignedIn: () => {
        setWho(null);
        setSignIn(false);
        setVisit((v) => v + 1);
      },
    });
  }

  if (who === null) return h('div', { class: 'main', 'aria-busy': 'true' }, 'Loading…');
  const superuser = who.superuser;
  const path = location.pathname.replace(/\/+$/, '') || '/';
  let page: VNode<any> = h(NotFound, { path, key: visit });
  let section = '';
  // A role that is not a superuser has no node-wide overview or metrics: it
  // starts at the tenants it administers.
  const visible = routes.filter(([, , s]) => superuser || s === 'tenants' || (s === 'trial' && trial));
  const visitor = !!trial && savedTrial() !== null;
  if (!superuser && path === '/') visible.unshift([/^\/$/, TenantsPage, 'tenants']);
  if (visitor && path === '/') visible.unshift([/^\/$/, TrialPage, 'trial']);  // a visitor starts at their trial
  for (const [re, component, s] of visible) {
    const m = re.exec(path);
    if (!m) continue;
    section = s;
    page = h(component, { key: visit, params: m.slice(1).map(decodeURIComponent),
      query: new URLSearchParams(location.search) });
    break;
  }
  const navLink = (href: string, text: string, s: string) =>
    link(href, text, { 'data-section': s, class: section === s ? 'active' : undefined });
  return h(Fragment, {},
    h('header', { class: 'topbar' },
      h('a', { href: '/', 'data-link': '', class: 'brand' }, h('span', { class: 'logo' }), 'Magnetar'),
      h('nav', { class: 'nav' },
        superuser ? navLink('/', 'Overview', 'overview') : null,
        visitor ? navLink('/trial', 'Your trial', 'trial') : null,
        navLink('/tenants', 'Tenants', 'tenants'),
        superuser ? navLink('/nodes', 'Nodes', 'nodes') : null,
        superuser ? navLink('/monitoring', 'Metrics', 'monitoring') : null),
      who.authenticated ? h('span', { class: 'who', 'data-testid': 'signed-in-role' }, who.role) : null,
      token()
        ? h('a', { href: '#', class: 'sign-out', 'data-testid': 'sign-out',
          onClick: (e: Event) => {
            e.preventDefault();
            setToken(null);
            saveTrial(null);
            setWho(null);
            setTokenChosen(false);
            setSignIn(!trial);
          } }, 'Sign out')
        : null),
    h('div', { class: 'layout' }, h(Sidebar, { path: location.pathname }), h('main', { class: 'main' }, page)));
}

document.addEventListener('click', (e) => {
  const a = (e.target as Element).closest('a[data-link]') as HTMLAnchorElement | null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href')!);
});
sampleOverview();
render(h(App, {}), document.getElementById('app')!);
