// A session's last error, read for the user (no React): what to do about it, and the login
// methods of an `agent_auth_required` error.

export interface AuthMethod {
  id: string;
  name: string;
  description?: string;
  command?: string;
  env_vars?: string[];
}

/** The auth methods of an `agent_auth_required` error (`details.auth_methods`). */
export function authMethods(details: unknown): AuthMethod[] {
  if (!details || typeof details !== 'object') return [];
  const list = (details as { auth_methods?: unknown }).auth_methods;
  if (!Array.isArray(list)) return [];
  return list.flatMap((m) => {
    if (!m || typeof m !== 'object') return [];
    const { id, name, description, command, env_vars } = m as Record<string, unknown>;
    if (typeof id !== 'string' || !id) return [];
    return [
      {
        id,
        name: typeof name === 'string' && name ? name : id,
        description: typeof description === 'string' ? description : undefined,
        command: typeof command === 'string' ? command : undefined,
        env_vars: Array.isArray(env_vars) ? env_vars.filter((v): v is string => typeof v === 'string') : undefined,
      },
    ];
  });
}

/** What to do about a session's last error, by its code (issue 14 d15: not one hint for all). */
export function errorHint(code: string): string {
  switch (code) {
    case 'agent_start_failed':
      return 'Check the agent profile’s command in Settings → Agent profiles (is the agent installed?), then resume the session.';
    case 'agent_auth_required':
      return 'Log in with one of the agent’s methods below (after its sign-in steps, if any).';
    default:
      return 'Send a message to try again, or resume the session (load keeps the conversation, fresh starts a new one).';
  }
}
