// The login buttons of an `agent_auth_required` error.
import type { AuthMethod } from '../../lib/sessionError';
import { authMethods } from '../../lib/sessionError';

/** One button per login method the agent offers (`session.authenticate`): on a running agent
 * it logs in over the open connection, otherwise the agent restarts with it. */
export function AuthMethods({
  details,
  disabled,
  onPick,
}: {
  details: unknown;
  disabled: boolean;
  onPick: (method: AuthMethod) => void;
}) {
  const methods = authMethods(details);
  if (!methods.length) return null;
  return (
    <div className="auth-methods" role="group" aria-label="Log in to the agent">
      {methods.map((m) => (
        <div key={m.id} className="auth-method">
          <button disabled={disabled} onClick={() => onPick(m)} title={m.description}>
            Log in: {m.name}
          </button>
          {m.command && (
            <span className="hint">
              {' '}
              first run <code>{m.command}</code> in a terminal
            </span>
          )}
          {m.env_vars && m.env_vars.length > 0 && (
            <span className="hint"> first set {m.env_vars.join(', ')} in the agent profile’s environment</span>
          )}
        </div>
      ))}
    </div>
  );
}
