// The extra MCP servers of an agent profile, edited in the profile form: a stdio server (a
// command the agent starts, with arguments and env) or a remote one (a URL, over http or sse,
// with headers). Env and header values come from the server as the mask `********`; a line
// left with the mask keeps the current value (the server does the keeping). A variable or
// header may instead take the value of a stored secret (issue 50): those are rows of their
// own under the lines, since a line of text has no room to say which it is.
import type { EnvVarDto, McpServerDto, McpTransportDto } from '../../api/types';
import { fromRefs, type RefDraft, splitRefs } from '../../lib/envVars';
import { SecretNameField } from './SecretNames';

/** How the agent reaches the server. */
export type McpForm = 'stdio' | McpTransportDto;

/** One server as the form edits it: text fields, parsed on save by [`toMcpServers`]. */
export type McpServerDraft = {
  name: string;
  form: McpForm;
  command: string;
  args: string;
  url: string;
  /** `NAME=value` lines (stdio) or `Name: value` lines (remote). */
  vars: string;
  /** The variables (stdio) or headers (remote) that take a secret's value. */
  refs: RefDraft[];
};

export function fromMcpServers(servers: McpServerDto[]): McpServerDraft[] {
  return servers.map((s) => {
    const form: McpForm = s.url !== undefined ? (s.transport ?? 'http') : 'stdio';
    const { values, refs } = splitRefs((form === 'stdio' ? s.env : s.headers) ?? []);
    const vars = values.map((v) => (form === 'stdio' ? `${v.name}=${v.value}` : `${v.name}: ${v.value}`));
    return { name: s.name, form, command: s.command ?? '', args: (s.args ?? []).join(' '), url: s.url ?? '', vars: vars.join('\n'), refs };
  });
}

/** Splits `NAME=value` or `Name: value` lines; the server says which names are invalid. */
function pairs(text: string, separator: string): EnvVarDto[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const at = line.indexOf(separator);
      return at < 0 ? { name: line.trim(), value: '' } : { name: line.slice(0, at).trim(), value: line.slice(at + separator.length).trim() };
    });
}

export function toMcpServers(drafts: McpServerDraft[]): McpServerDto[] {
  return drafts.map((d) =>
    d.form === 'stdio'
      ? { name: d.name.trim(), command: d.command, args: d.args.split(/\s+/).filter(Boolean), env: [...pairs(d.vars, '='), ...fromRefs(d.refs)] }
      : { name: d.name.trim(), url: d.url, transport: d.form, headers: [...pairs(d.vars, ':'), ...fromRefs(d.refs)] },
  );
}

const empty: McpServerDraft = { name: '', form: 'stdio', command: '', args: '', url: '', vars: '', refs: [] };

export function McpServersEditor({ value, onChange }: { value: McpServerDraft[]; onChange: (next: McpServerDraft[]) => void }) {
  const set = (i: number, patch: Partial<McpServerDraft>) => onChange(value.map((d, j) => (j === i ? { ...d, ...patch } : d)));
  return (
    <fieldset className="mcp-servers">
      <legend>MCP servers</legend>
      <p className="hint">
        Handed to the agent next to Kandev&apos;s own server. Values are secrets: saved ones show as ******** and stay as they are unless
        replaced. A variable or header may instead take the value of a secret of Settings › Secrets, read when the agent starts.
      </p>
      {value.map((d, i) => (
        <fieldset key={i} className="mcp-server" aria-label={`MCP server ${i + 1}`}>
          <div className="row">
            <label>
              Server name
              <input value={d.name} onChange={(e) => set(i, { name: e.target.value })} required />
            </label>
            <label>
              Transport
              <select value={d.form} onChange={(e) => set(i, { form: e.target.value as McpForm })}>
                <option value="stdio">stdio (a command)</option>
                <option value="http">http (a URL)</option>
                <option value="sse">sse (a URL)</option>
              </select>
            </label>
          </div>
          {d.form === 'stdio' ? (
            <div className="row">
              <label>
                Server command
                <input value={d.command} onChange={(e) => set(i, { command: e.target.value })} />
              </label>
              <label>
                Server arguments
                <input value={d.args} onChange={(e) => set(i, { args: e.target.value })} />
              </label>
            </div>
          ) : (
            <label>
              URL
              <input value={d.url} onChange={(e) => set(i, { url: e.target.value })} placeholder="https://example.com/mcp" />
            </label>
          )}
          <label>
            {d.form === 'stdio' ? 'Environment' : 'Headers'} <span className="hint">{d.form === 'stdio' ? 'NAME=value, one a line' : 'Name: value, one a line'}</span>
            <textarea rows={2} value={d.vars} onChange={(e) => set(i, { vars: e.target.value })} />
          </label>
          <SecretRefs what={d.form === 'stdio' ? 'Variable' : 'Header'} value={d.refs} onChange={(refs) => set(i, { refs })} />
          <div className="actions">
            <button type="button" className="danger-outline" onClick={() => onChange(value.filter((_, j) => j !== i))}>
              Remove server {d.name || i + 1}
            </button>
          </div>
        </fieldset>
      ))}
      <button type="button" onClick={() => onChange([...value, { ...empty }])}>
        Add MCP server
      </button>
    </fieldset>
  );
}

/** The variables or headers of one server that take a stored secret's value: a name and the
 * secret's name each. */
function SecretRefs(props: { what: 'Variable' | 'Header'; value: RefDraft[]; onChange: (next: RefDraft[]) => void }) {
  const { what, value, onChange } = props;
  const set = (i: number, patch: Partial<RefDraft>) => onChange(value.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <>
      {value.map((r, i) => (
        <div className="row" key={i} role="group" aria-label={`Secret reference ${i + 1}`}>
          <label>
            {what} name
            <input value={r.name} onChange={(e) => set(i, { name: e.target.value })} spellCheck={false} />
          </label>
          <SecretNameField value={r.secret} onChange={(secret) => set(i, { secret })} />
          <button type="button" className="danger-outline" onClick={() => onChange(value.filter((_, j) => j !== i))}>
            Remove {r.name.trim() || `reference ${i + 1}`}
          </button>
        </div>
      ))}
      <button type="button" className="add-ref" onClick={() => onChange([...value, { name: '', secret: '' }])}>
        Add {what.toLowerCase()} from a secret
      </button>
    </>
  );
}
