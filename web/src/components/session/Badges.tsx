// The session bar's badges: the agent as it introduced itself, the model it uses, and its
// context window use.
import type { SessionDto } from '../../api/types';

/** The agent's title (else name) and version, as its ACP `initialize` answered (`agentInfo`). */
export function AgentBadge({ session }: { session: SessionDto }) {
  const info = session.agent_info && typeof session.agent_info === 'object' ? (session.agent_info as Record<string, unknown>) : {};
  const title = typeof info.title === 'string' && info.title ? info.title : typeof info.name === 'string' ? info.name : null;
  if (!title) return null;
  const version = typeof info.version === 'string' && info.version ? ` ${info.version}` : '';
  return (
    <span className="badge" data-testid="agent-info" title="The agent, as it introduced itself">
      {title}
      {version}
    </span>
  );
}

/**
 * The model the agent says it uses (its `model` config option), and a warning when that is not
 * the one the session asked for (its profile's model): issue 14 defect 14.
 */
export function ModelBadge({ session }: { session: SessionDto }) {
  const options = session.config_options;
  const used =
    options && typeof options === 'object' && !Array.isArray(options) && typeof options.model === 'string'
      ? options.model
      : null;
  const asked = session.model;
  if (!used && !asked) return null;
  if (asked && used && asked !== used) {
    return (
      <span className="badge needs-you-badge" role="note" data-testid="model-mismatch">
        model: {used} (asked for {asked})
      </span>
    );
  }
  return (
    <span className="badge" data-testid="session-model">
      model: {used ?? asked}
    </span>
  );
}

/** The agent's context window use, from its latest usage report (`{used, size}`). */
export function UsageBadge({ session }: { session: SessionDto }) {
  const used = session.context_window?.used;
  const size = session.context_window?.size;
  if (used == null || size == null || size <= 0) return null;
  const percent = Math.round((used / size) * 100);
  return (
    <span className="badge" data-testid="session-usage" title={`${percent}% of the context window used`}>
      context {used.toLocaleString('en-US')} / {size.toLocaleString('en-US')}
    </span>
  );
}
