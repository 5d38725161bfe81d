// The extra MCP servers of an agent profile, edited in the profile form: a stdio server (a
// command the agent starts, with arguments and env) or a remote one (a URL, over http or sse,
// with headers). Env and header values come from the server as the mask `********`; a line
// left with the mask keeps the current value (the server does the keeping).
import type { EnvVarDto, McpServerDto, McpTransportDto } from '../../api/types';

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
};

export function fromMcpServers(servers: McpServerDto[]): McpServerDraft[] {
  return servers.map((s) => {
    const form: McpForm = s.url !== undefined ? (s.transport ?? 'http') : 'stdio';
    const vars = form === 'stdio' ? (s.env ?? []).map((e) => `${e.name}=${e.value}`) : (s.headers ?? []).map((h) => `${h.name}: ${h.value}`);
    return { name: s.name, form, command: s.command ?? '', args: (s.args ?? []).join(' '), url: s.url ?? '', vars: vars.join('\n') };
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
      ? { name: d.name.trim(), command: d.command, args: d.args.split(/\s+/).filter(Boolean), env: pairs(d.vars, '=') }
      : { name: d.name.trim(), url: d.url, transport: d.form, headers: pairs(d.vars, ':') },
  );
}

const empty: McpServerDraft = { name: '', form: 'stdio', command: '', args: '', url: '', vars: '' };

export function McpServersEditor({ value, onChange }: { value: McpServerDraft[]; onChange: (next: McpServerDraft[]) => void }) {
  const set = (i: number, patch: Partial<McpServerDraft>) => onChange(value.map((d, j) => (j === i ? { ...d, ...patch } : d)));
  return (
    <fieldset className="mcp-servers">
      <legend>MCP servers</legend>
      <p className="hint">
        Handed to the agent next to Kandev&apos;s own server. Values are secrets: saved ones show as ******** and stay as they are unless
        replaced.
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
