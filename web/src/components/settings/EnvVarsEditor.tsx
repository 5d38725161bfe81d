// A profile's environment variables (issue 45, item 2): name = value rows, added, edited and
// removed in the profile form. Values are secrets: the server answers each as the mask
// `********`, so a saved variable shows an empty value field that says it is kept; left empty
// it is sent back as the mask, which keeps the stored value (docs/api.md "Profile secrets").
import type { EnvVarDto } from '../../api/types';

/** The mask the API shows for every secret value (`SECRET_MASK`). */
export const SECRET_MASK = '********';

/** One row as the form edits it. `saved`: the name the variable had when the form opened, for
 * a variable the server holds a value of (kept while `value` stays empty). */
export type EnvDraft = { name: string; value: string; saved: string | null };

export function fromEnv(env: EnvVarDto[]): EnvDraft[] {
  return env.map((e) => ({ name: e.name, value: e.value === SECRET_MASK ? '' : e.value, saved: e.value === SECRET_MASK ? e.name : null }));
}

/** The list to send, or what is wrong with it in the form's words. */
export function toEnv(drafts: EnvDraft[]): EnvVarDto[] | string {
  const rows = drafts.map((d) => ({ ...d, name: d.name.trim() })).filter((d) => d.name !== '' || d.value !== '');
  const seen = new Set<string>();
  for (const d of rows) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(d.name)) {
      return `Environment variable “${d.name}” is not a valid name: use letters, digits and _, not starting with a digit.`;
    }
    if (seen.has(d.name)) return `Environment variable ${d.name} is listed twice.`;
    seen.add(d.name);
    if (d.value === '' && d.saved !== null && d.saved !== d.name) {
      return `Give a value for ${d.name}: a saved value stays with the name it was saved under (${d.saved}).`;
    }
  }
  return rows.map((d) => ({ name: d.name, value: d.value === '' && d.saved === d.name ? SECRET_MASK : d.value }));
}

export function EnvVarsEditor({ value, onChange }: { value: EnvDraft[]; onChange: (next: EnvDraft[]) => void }) {
  const set = (i: number, patch: Partial<EnvDraft>) => onChange(value.map((d, j) => (j === i ? { ...d, ...patch } : d)));
  return (
    <fieldset className="env-vars">
      <legend>Environment variables</legend>
      <p className="hint">Set for the agent only (API keys, say). Values are secrets: a saved one is not shown, and stays as it is unless you type a new one.</p>
      {value.map((d, i) => (
        <div className="row" key={i} role="group" aria-label={`Variable ${i + 1}`}>
          <label>
            Variable name
            <input value={d.name} onChange={(e) => set(i, { name: e.target.value })} placeholder="API_KEY" spellCheck={false} />
          </label>
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
          <button type="button" className="danger-outline" onClick={() => onChange(value.filter((_, j) => j !== i))}>
            Remove {d.name.trim() || `variable ${i + 1}`}
          </button>
        </div>
      ))}
      <button type="button" onClick={() => onChange([...value, { name: '', value: '', saved: null }])}>
        Add variable
      </button>
    </fieldset>
  );
}
