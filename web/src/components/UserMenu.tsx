// Who is signed in, and the way out (issue 21): shown in the header when the page was let in
// by a login (a user's session, or the server token's cookie); nothing without accounts. The
// user's name opens their own page (`/account`: password, personal tokens).
// Logging out is a `fetch` POST rather than a form: the app's pages send no referrer, and a
// form's navigation would then carry `Origin: null`, which the server's Origin check refuses.
import { useMe } from '../lib/me';
import { navigate } from '../lib/router';
import { useMutation } from '../lib/useMutation';

export function UserMenu() {
  const me = useMe();
  const { error, run } = useMutation();
  const via = me.data?.via;
  if (via !== 'session' && via !== 'server_token') return null;
  const logout = () =>
    run(async () => {
      const response = await fetch('/logout', { method: 'POST', credentials: 'same-origin' });
      if (!response.ok) throw new Error(`logging out failed (HTTP ${response.status}); try again`);
      window.location.assign('/login');
    });
  return (
    <span className="user-menu">
      {me.data?.user && (
        <a
          className="navlink user-name"
          data-testid="user-name"
          href="/account"
          title="Your account: password and personal tokens"
          onClick={(e) => {
            e.preventDefault();
            navigate('/account');
          }}
        >
          {me.data.user.name}
        </a>
      )}
      <button type="button" className="navlink" onClick={() => void logout()}>
        Log out
      </button>
      {error && (
        <span role="alert" className="user-menu-error">
          {error}
        </span>
      )}
    </span>
  );
}
