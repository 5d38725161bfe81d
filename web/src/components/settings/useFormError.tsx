// The error of a settings form or control: `wrap` runs an action and keeps its failure
// (`useMutation`), `view` shows it next to the control (an inline alert). `labels` (a request
// field → the form's label for it) puts a refusal that starts with a field's name in the
// form's words: "forge_api_base_url must be ..." reads "Forge API URL must be ...".
import { ApiError, errorText } from '../../api/client';
import { InlineError } from '../ErrorBanner';
import { useMutation } from '../../lib/useMutation';

export function useFormError(labels?: Record<string, string>) {
  const { run, error } = useMutation();
  const describe = (e: unknown) => labelled(e, labels) ?? inWords(errorText(e), labels);
  const wrap = (f: () => Promise<unknown>) => run(f, { describe });
  const view = <InlineError error={error} />;
  return { wrap, view };
}

/** `message` with a leading field name replaced by its label: `name ...`, `name: ...`, and for
 * lists `name[1].url ...` ("MCP server 2 url ..."); any other message as it is. */
export function inWords(message: string, labels: Record<string, string> | undefined): string {
  if (!labels) return message;
  // Longest first: `ssh.identity_file` before `ssh`.
  for (const field of Object.keys(labels).sort((a, b) => b.length - a.length)) {
    const escaped = field.replace(/[.[\]]/g, '\\$&');
    const m = new RegExp(`^${escaped}(?:\\[(\\d+)\\])?(?:\\.([a-z_]+))?(:? )`).exec(message);
    if (!m) continue;
    const index = m[1] === undefined ? '' : ` ${Number(m[1]) + 1}`;
    const part = m[2] === undefined ? '' : ` ${m[2].replace(/_/g, ' ')}`;
    return `${labels[field]}${index}${part}${m[3] === ': ' ? ': ' : ' '}${message.slice(m[0].length)}`;
  }
  return message;
}

/** A field's refusal (`details: {field, problem}`; its message names the field in the
 * server's words) with the form's label for the field, when the form has one. */
function labelled(e: unknown, labels: Record<string, string> | undefined): string | null {
  if (!labels || !(e instanceof ApiError)) return null;
  const d = e.details as { field?: unknown; problem?: unknown } | null | undefined;
  if (typeof d?.field !== 'string' || typeof d.problem !== 'string') return null;
  const raw = `${d.field} ${d.problem}`;
  const named = inWords(raw, labels);
  return named === raw ? null : named;
}
