// The secrets (issue 50) a repository's setup, cleanup and dev scripts get as environment
// variables of the same names, typed as names separated by commas. A name set nowhere makes
// the script refuse to run, saying where to add it; on an SSH or container executor each must
// also be among the executor's allowed secrets. An admin is offered the names stored.
import { useId } from 'react';
import { listCompletions } from '../../lib/secrets';
import { useSecretNames } from './SecretNames';

/** The field of a repository's forms. */
export function ScriptSecretsField({ value, onChange }: { value: string; onChange: (next: string) => void }) {
  const id = useId();
  const names = useSecretNames();
  // Named by its label alone, the help its description: other fields' names ("Name") are not
  // found in the help's words.
  return (
    <label>
      <span id={`${id}-label`}>Script secrets</span>
      <span className="hint" id={`${id}-help`}>
        Set as environment variables of the same names for the setup, cleanup and dev scripts.
      </span>
      <input
        aria-labelledby={`${id}-label`}
        aria-describedby={`${id}-help`}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        list={`${id}-names`}
        placeholder="NPM_TOKEN, GITHUB_TOKEN"
        spellCheck={false}
        autoComplete="off"
      />
      <datalist id={`${id}-names`}>
        {listCompletions(value, names).map((c) => (
          <option key={c.value} value={c.value} label={c.scopes} />
        ))}
      </datalist>
    </label>
  );
}

/** A repository's script secrets in its row: nothing when it has none. */
export function ScriptSecretsSummary({ names }: { names: string[] }) {
  if (names.length === 0) return null;
  return (
    <div className="hint">
      Script secrets: <span data-testid="script-secrets">{names.join(', ')}</span>
    </div>
  );
}
