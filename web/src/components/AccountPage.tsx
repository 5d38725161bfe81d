// The signed-in user's own page (`/account`, issue 45, item 5): their password, and their
// personal tokens for scripts (create — the secret is shown this once —, list, revoke). The
// header's user name opens it.
import { useCallback, useState } from 'react';
import { call } from '../api/client';
import type { TokenCreated } from '../api/types';
import { useMe } from '../lib/me';
import { toast } from '../lib/toast';
import { useMutation } from '../lib/useMutation';
import { useRead } from '../lib/useRead';
import { InlineError } from './ErrorBanner';

export function AccountPage() {
  const me = useMe();
  if (me.error) return <InlineError error={me.error} onRetry={me.retry} />;
  if (!me.data) return <p className="hint">Reading your account…</p>;
  const user = me.data.user;
  if (!user) {
    return (
      <section className="account">
        <h1>Your account</h1>
        <p className="hint">
          This page is for a user who logged in with a name and password. This server is used without accounts (or with its
          access token); add a user on its machine with <code>kandev user add NAME</code>.
        </p>
      </section>
    );
  }
  return (
    <section className="account">
      <h1>Your account</h1>
      <p>
        Signed in as <strong data-testid="account-name">{user.name}</strong>.
      </p>
      <PasswordForm name={user.name} />
      <Tokens />
    </section>
  );
}

function PasswordForm({ name }: { name: string }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const [done, setDone] = useState(false);
  const { busy, error, setError, run } = useMutation();
  return (
    <form
      className="form card-form"
      aria-label="Change password"
      onSubmit={async (e) => {
        e.preventDefault();
        setDone(false);
        if (next !== again) {
          setError('The two new passwords differ; type the same one twice.');
          return;
        }
        await run(async () => {
          const r = await call('user.password.set', { current_password: current, new_password: next });
          setCurrent('');
          setNext('');
          setAgain('');
          if (!r.session_kept) {
            window.location.assign('/login');
            return;
          }
          setDone(true);
          toast('Password changed');
        });
      }}
    >
      <h2>Password</h2>
      {/* For password managers: whose password this is. */}
      <input type="text" name="username" autoComplete="username" value={name} readOnly hidden />
      <label>
        Current password
        <input type="password" autoComplete="current-password" value={current} onChange={(e) => setCurrent(e.target.value)} required />
      </label>
      <div className="row">
        <label>
          New password <span className="hint">at least 8 characters</span>
          <input type="password" autoComplete="new-password" value={next} onChange={(e) => setNext(e.target.value)} required minLength={8} />
        </label>
        <label>
          New password again
          <input type="password" autoComplete="new-password" value={again} onChange={(e) => setAgain(e.target.value)} required />
        </label>
      </div>
      {done && (
        <p className="hint" role="status">
          Your password is changed. Your other login sessions ended and pages opened with your tokens reconnect; this page stays
          signed in.
        </p>
      )}
      <InlineError error={error} />
      <div className="actions">
        <button className="primary" type="submit" disabled={busy}>
          Change password
        </button>
      </div>
    </form>
  );
}

function Tokens() {
  const load = useCallback(() => call('user.token.list', {}).then((r) => r.tokens), []);
  const list = useRead(load);
  const [label, setLabel] = useState('');
  const [created, setCreated] = useState<TokenCreated | null>(null);
  const { busy, error, run } = useMutation();
  const tokens = list.data;
  return (
    <section aria-label="Personal tokens">
      <h2>Personal tokens</h2>
      <p className="hint">
        For scripts and tools: send one as <code>Authorization: Bearer kdv_…</code>. It acts as you until you revoke it.
      </p>
      <InlineError error={list.error} onRetry={list.retry} />
      {tokens && tokens.length === 0 && <p className="hint">No tokens yet.</p>}
      {tokens && tokens.length > 0 && (
        <table className="table" aria-label="Your tokens">
          <thead>
            <tr>
              <th>Label</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {tokens.map((t) => (
              <tr key={t.id}>
                <td>{t.name}</td>
                <td>{new Date(t.created_at).toLocaleString()}</td>
                <td className="row-actions">
                  <button
                    className="danger-outline"
                    aria-label={`Revoke ${t.name}`}
                    disabled={busy}
                    onClick={() =>
                      void run(async () => {
                        await call('user.token.revoke', { id: t.id });
                        if (created?.token.id === t.id) setCreated(null);
                        list.retry();
                        toast(`Revoked ${t.name}`);
                      })
                    }
                  >
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {created && <NewSecret created={created} onDone={() => setCreated(null)} />}
      <form
        className="form card-form"
        aria-label="New token"
        onSubmit={async (e) => {
          e.preventDefault();
          await run(async () => {
            setCreated(await call('user.token.create', { name: label }));
            setLabel('');
            list.retry();
          });
        }}
      >
        <label>
          Label <span className="hint">where the token is used, e.g. ci</span>
          <input value={label} onChange={(e) => setLabel(e.target.value)} required />
        </label>
        <InlineError error={error} />
        <div className="actions">
          <button className="primary" type="submit" disabled={busy}>
            Create token
          </button>
        </div>
      </form>
    </section>
  );
}

/** The secret of a token just made: shown this once, with a way to copy it. */
function NewSecret({ created, onDone }: { created: TokenCreated; onDone: () => void }) {
  const [copied, setCopied] = useState<string | null>(null);
  return (
    <div className="new-secret" role="status">
      <p>
        Token <strong>{created.token.name}</strong> is made. Copy it now: it is not shown again (only a hash is kept).
      </p>
      <div className="row">
        <input
          aria-label="Secret of the new token"
          readOnly
          value={created.secret}
          spellCheck={false}
          onFocus={(e) => e.target.select()}
          className="secret"
        />
        <button
          type="button"
          onClick={() =>
            navigator.clipboard.writeText(created.secret).then(
              () => setCopied('Copied.'),
              () => setCopied('Copying failed: select the token and copy it yourself.'),
            )
          }
        >
          Copy
        </button>
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
      {copied && <p className="hint">{copied}</p>}
    </div>
  );
}
