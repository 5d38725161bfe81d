// A profile's environment variables (issue 45, item 2; issue 50): name = value rows, added,
// edited and removed in the profile form. Each row is a value (kept secret: a saved one shows
// as an empty field that says it is kept) or takes the value of a stored secret, named here
// and read when the agent starts. The rows' rules are in ../../lib/envVars.ts.
import { EMPTY_ENV, type EnvDraft } from '../../lib/envVars';
import { SecretNameField } from './SecretNames';

export function EnvVarsEditor({ value, onChange }: { value: EnvDraft[]; onChange: (next: EnvDraft[]) => void }) {
  const set = (i: number, patch: Partial<EnvDraft>) => onChange(value.map((d, j) => (j === i ? { ...d, ...patch } : d)));
  return (
    <fieldset className="env-vars">
      <legend>Environment variables</legend>
      <p className="hint">
        Set for the agent only (API keys, say). A value is kept secret: a saved one is not shown, and stays as it is unless
        you type a new one. A secret is one of Settings › Secrets, read when the agent starts: the repository’s of that
        name, else the workspace’s, else the server’s.
      </p>
      {value.map((d, i) => (
        <div className="row" key={i} role="group" aria-label={`Variable ${i + 1}`}>
          <label>
            Variable name
            <input value={d.name} onChange={(e) => set(i, { name: e.target.value })} placeholder="API_KEY" spellCheck={false} />
          </label>
          {/* Named by aria-label, not a wrapping label: the label's text would hold the options'
              ("Value"), and the value field is found by its label "Value". */}
          <select
            className="env-source"
            aria-label="Source"
            value={d.secret === null ? 'value' : 'secret'}
            onChange={(e) => set(i, { secret: e.target.value === 'secret' ? (d.secret ?? '') : null })}
          >
            <option value="value">Value</option>
            <option value="secret">Secret</option>
          </select>
          {d.secret === null ? (
            <label>
              Value
              <input
                type="password"
                autoComplete="new-password"
                value={d.value}
                onChange={(e) => set(i, { value: e.target.value })}
                placeholder={d.saved !== null && d.saved === d.name.trim() ? 'saved; type to replace' : ''}
              />
            </label>
          ) : (
            <SecretNameField value={d.secret} onChange={(secret) => set(i, { secret })} />
          )}
          <button type="button" className="danger-outline" onClick={() => onChange(value.filter((_, j) => j !== i))}>
            Remove {d.name.trim() || `variable ${i + 1}`}
          </button>
        </div>
      ))}
      <button type="button" onClick={() => onChange([...value, { ...EMPTY_ENV }])}>
        Add variable
      </button>
    </fieldset>
  );
}
