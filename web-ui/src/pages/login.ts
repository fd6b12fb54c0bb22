// Sign-in, shown when the node has authentication on and the console has
// no token (or its token was refused): the same tokens every client uses
// (magnetar tokens create ...). The token is checked against the API before
// the console goes on, and kept for this browser tab only.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, setToken } from '../api';

export function LoginPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    document.title = 'Sign in · Magnetar';
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = value.trim();
    if (!t) return setError('Paste a token first.');
    setBusy(true);
    setToken(t);
    try {
      await api.clusters();  // any authenticated role may read these
      setError('');
      onSignedIn();
    } catch (err) {
      setToken(null);
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  return h('div', { class: 'login' },
    h('form', { class: 'login-card', onSubmit: submit, 'data-testid': 'login-form' },
      h('h1', {}, h('span', { class: 'logo' }), 'Sign in to Magnetar'),
      h('p', {}, 'This node has authentication on. Paste a token for your role (',
        h('code', {}, 'magnetar tokens create ...'), ').'),
      h('textarea', { 'data-testid': 'login-token', rows: 4, value, spellcheck: false, autocomplete: 'off',
        placeholder: 'eyJhbGciOi...', onInput: (e: Event) => setValue((e.target as HTMLTextAreaElement).value) }),
      error ? h('p', { class: 'error', 'data-testid': 'login-error', role: 'alert' }, error) : null,
      h('button', { type: 'submit', disabled: busy, 'data-testid': 'login-submit' }, busy ? 'Checking…' : 'Sign in')));
}
