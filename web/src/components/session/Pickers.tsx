// The session bar's mode, model and config-option pickers.
import { call } from '../../api/client';
import type { SessionDto } from '../../api/types';
import { choicesOf } from '../../lib/pickers';
import { useMutation } from '../../lib/useMutation';

/**
 * The mode, model and config-option pickers (issue 18): what the agent offered when it
 * started (the session's `agent_info.modes` and `agent_info.config_options`); a choice goes to
 * the agent (`session.set_mode`, `session.set_config_option`) and the pickers and badges
 * follow what it confirms (the session's `config_options` values, as the agent answered).
 * The `mode` config option is left out when the agent lists its modes (the Mode picker).
 */
export function Pickers({ session, onError }: { session: SessionDto; onError: (e: string | null) => void }) {
  const info = session.agent_info && typeof session.agent_info === 'object' ? (session.agent_info as Record<string, unknown>) : {};
  const modes = choicesOf(Array.isArray(info.modes) ? info.modes.map((m: { id?: unknown; name?: unknown }) => ({ value: m.id, name: m.name })) : []);
  const options = (Array.isArray(info.config_options) ? (info.config_options as Record<string, unknown>[]) : []).filter(
    (o) => !(modes.length > 0 && (o.id === 'mode' || o.category === 'mode')),
  );
  const values = session.config_options && typeof session.config_options === 'object' ? (session.config_options as Record<string, unknown>) : {};
  // A choice's failure is shown by the session view, under its bar.
  const { busy, run: change } = useMutation(onError);
  return (
    <>
      {modes.length > 0 && (
        <label className="compact">
          <span className="sr-only">Mode</span>
          <select
            aria-label="Mode"
            disabled={busy}
            value={session.session_mode ?? ''}
            onChange={(e) => void change(() => call('session.set_mode', { id: session.id, mode_id: e.target.value }))}
          >
            {!session.session_mode && <option value="">mode…</option>}
            {modes.map((m) => (
              <option key={m.value} value={m.value}>
                {m.name}
              </option>
            ))}
          </select>
        </label>
      )}
      {options.map((option) => {
        const id = String(option.id);
        const choices = choicesOf(option.options);
        if (choices.length === 0) return null;
        const isModel = id === 'model' || option.category === 'model';
        const label = isModel ? 'Model' : typeof option.name === 'string' && option.name ? option.name : id;
        const value = typeof values[id] === 'string' ? String(values[id]) : '';
        return (
          <label className="compact" key={id}>
            <span className="sr-only">{label}</span>
            <select
              aria-label={label}
              data-config-id={id}
              disabled={busy}
              value={value}
              onChange={(e) =>
                void change(() => call('session.set_config_option', { id: session.id, config_id: id, value: e.target.value }))
              }
            >
              {!value && <option value="">{label.toLowerCase()}…</option>}
              {choices.map((m) => (
                <option key={m.value} value={m.value}>
                  {m.name}
                </option>
              ))}
            </select>
          </label>
        );
      })}
    </>
  );
}
