// A profile's environment variables and its MCP servers' env and headers as the profile form
// edits them (issues 45 and 50; no React). A variable is a value or a reference to a stored
// secret. Values are secrets too: the server answers each as the mask `********`, so a saved
// value shows as an empty field that says it is kept; left empty it is sent back as the mask,
// which keeps the stored value (docs/api.md "Profile secrets"). A reference is answered as
// `{name, value: "", secret}` and sent back the same way; the agent gets the secret's value
// when it starts.
import type { EnvVarDto } from '../api/types';

/** The mask the API shows for every stored value (`SECRET_MASK`). */
export const SECRET_MASK = '********';

/** An environment variable's name, which is also what a secret's name must be. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether `name` is an environment variable's name (letters, digits and _, not starting with
 * a digit): what a variable and a secret may be called. */
export function isEnvName(name: string): boolean {
  return ENV_NAME.test(name);
}

/** One row as the form edits it. `saved`: the name the variable had when the form opened, for
 * a variable the server holds a value of (kept while `value` stays empty). `secret`: `null`
 * for a value; else the name of the secret the variable takes its value from (`''` while the
 * row is switched to a secret and none is named yet). */
export type EnvDraft = { name: string; value: string; saved: string | null; secret: string | null };

/** A new, empty row (a value). */
export const EMPTY_ENV: EnvDraft = { name: '', value: '', saved: null, secret: null };

export function fromEnv(env: EnvVarDto[]): EnvDraft[] {
  return env.map((e) =>
    e.secret !== undefined
      ? { name: e.name, value: '', saved: null, secret: e.secret }
      : { name: e.name, value: e.value === SECRET_MASK ? '' : e.value, saved: e.value === SECRET_MASK ? e.name : null, secret: null },
  );
}

/** The list to send, or what is wrong with it in the form's words. */
export function toEnv(drafts: EnvDraft[]): EnvVarDto[] | string {
  const rows = drafts
    .map((d) => ({ ...d, name: d.name.trim(), secret: d.secret === null ? null : d.secret.trim() }))
    .filter((d) => d.name !== '' || d.value !== '' || (d.secret ?? '') !== '');
  const seen = new Set<string>();
  for (const d of rows) {
    if (!isEnvName(d.name)) {
      return `Environment variable “${d.name}” is not a valid name: use letters, digits and _, not starting with a digit.`;
    }
    if (seen.has(d.name)) return `Environment variable ${d.name} is listed twice.`;
    seen.add(d.name);
    if (d.secret !== null) {
      const problem = secretProblem(d.secret);
      if (problem) return `Environment variable ${d.name}: ${problem}`;
      continue;
    }
    if (d.value === '' && d.saved !== null && d.saved !== d.name) {
      return `Give a value for ${d.name}: a saved value stays with the name it was saved under (${d.saved}).`;
    }
  }
  return rows.map((d) =>
    d.secret !== null
      ? { name: d.name, value: '', secret: d.secret }
      : { name: d.name, value: d.value === '' && d.saved === d.name ? SECRET_MASK : d.value },
  );
}

/** What is wrong with `secret` as the name of a secret a variable takes its value from. */
function secretProblem(secret: string): string | null {
  if (secret === '') return 'choose the secret it takes its value from.';
  if (!isEnvName(secret)) return `“${secret}” is not a secret’s name (letters, digits and _, not starting with a digit).`;
  return null;
}

/** One reference of an MCP server's env or headers: the variable or header `name` takes the
 * value of the secret `secret`. */
export type RefDraft = { name: string; secret: string };

/** An MCP server's env or headers, split into the values (edited as lines of text) and the
 * references to secrets (edited as rows). */
export function splitRefs(vars: EnvVarDto[]): { values: EnvVarDto[]; refs: RefDraft[] } {
  return {
    values: vars.filter((v) => v.secret === undefined),
    refs: vars.flatMap((v) => (v.secret !== undefined ? [{ name: v.name, secret: v.secret }] : [])),
  };
}

/** The references to send, blank rows left out; the server checks the names (and says which
 * one is wrong in the form's words). */
export function fromRefs(refs: RefDraft[]): EnvVarDto[] {
  return refs
    .map((r) => ({ name: r.name.trim(), value: '', secret: r.secret.trim() }))
    .filter((r) => r.name !== '' || r.secret !== '');
}
