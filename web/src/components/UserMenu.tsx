// Who is signed in, and the way out (issue 21): shown in the header when the page was let in
// by a login (a user's session, or the server token's cookie); nothing without accounts.
import { call } from '../api/client';
import { useRead } from '../lib/useRead';

const readMe = () => call('user.me', {});

export function UserMenu() {
  const me = useRead(readMe);
  const via = me.data?.via;
  if (via !== 'session' && via !== 'server_token') return null;
  return (
    <form className="user-menu" method="post" action="/logout">
      {me.data?.user && (
        <span className="user-name" data-testid="user-name" title="Signed in as">
          {me.data.user.name}
        </span>
      )}
      <button type="submit" className="navlink">
        Log out
      </button>
    </form>
  );
}
