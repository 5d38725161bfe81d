// The form that creates or edits an agent profile: its agent, command, model and mode, its
// environment variables (secrets, or references to stored ones) and extra MCP servers.
import { useState } from 'react';
import { call } from '../../api/client';
import type { AgentKind, AgentKindDto, AgentProfileDto } from '../../api/types';
import { fromEnv, toEnv } from '../../lib/envVars';
import { EnvVarsEditor } from './EnvVarsEditor';
import { McpServersEditor, fromMcpServers, toMcpServers } from './McpServersEditor';
import { SecretNames } from './SecretNames';
import { useFormError } from './useFormError';

/** The form's words for the fields a refusal may start with. */
const LABELS = {
  name: 'Name',
  command: 'Command',
  args: 'Arguments',
  model: 'Model',
  mode: 'Mode',
  env: 'Environment variable',
  mcp_servers: 'MCP server',
};

export function ProfileForm({ kinds, profile, onDone }: { kinds: AgentKind[]; profile: AgentProfileDto | null; onDone: () => void }) {
  const [name, setName] = useState(profile?.name ?? '');
  const [kind, setKind] = useState(profile?.kind ?? 'mock');
  const [command, setCommand] = useState(profile?.command ?? '');
  const [args, setArgs] = useState(profile?.args.join(' ') ?? '');
  const [model, setModel] = useState(profile?.model ?? '');
  const [mode, setMode] = useState(profile?.mode ?? '');
  const [autoApprove, setAutoApprove] = useState(profile?.auto_approve ?? false);
  const [mcpServers, setMcpServers] = useState(() => fromMcpServers(profile?.mcp_servers ?? []));
  const [env, setEnv] = useState(() => fromEnv(profile?.env ?? []));
  const { wrap, view } = useFormError(LABELS);
  const argList = args.split(/\s+/).filter(Boolean);
  return (
    <form
      className="form card-form"
      aria-label={profile ? 'Edit profile' : 'New profile'}
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(async () => {
          const envList = toEnv(env);
          if (typeof envList === 'string') throw new Error(envList);
          await (profile
            ? call('agent.profile.update', {
                id: profile.id,
                name,
                command,
                args: argList,
                env: envList,
                model: model || null,
                mode: mode || null,
                auto_approve: autoApprove,
                mcp_servers: toMcpServers(mcpServers),
              })
            : call('agent.profile.create', {
                name,
                kind,
                command,
                args: argList,
                env: envList,
                model: model || undefined,
                mode: mode || undefined,
                auto_approve: autoApprove,
                mcp_servers: toMcpServers(mcpServers),
              }));
        });
        if (ok) onDone();
      }}
    >
      <div className="row">
        <label>
          Name
          {/* Focused when the form opens, which also brings it into view (it opens above
              the list, whichever row's Edit opened it). */}
          <input value={name} onChange={(e) => setName(e.target.value)} required autoFocus />
        </label>
        <label>
          Agent
          <select value={kind} disabled={!!profile} onChange={(e) => setKind(e.target.value as AgentKindDto)}>
            {(kinds.length ? kinds.map((k) => k.kind) : ['mock', 'claude', 'codex', 'gemini', 'opencode', 'custom']).map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
      </div>
      <div className="row">
        <label>
          Command <span className="hint">{kind === 'custom' ? 'required' : 'empty: the default'}</span>
          <input value={command} onChange={(e) => setCommand(e.target.value)} />
        </label>
        <label>
          Arguments
          <input value={args} onChange={(e) => setArgs(e.target.value)} />
        </label>
      </div>
      <div className="row">
        <label>
          Model
          <input value={model} onChange={(e) => setModel(e.target.value)} />
        </label>
        <label>
          Mode
          <input value={mode} onChange={(e) => setMode(e.target.value)} />
        </label>
      </div>
      <label className="check">
        <input type="checkbox" checked={autoApprove} onChange={(e) => setAutoApprove(e.target.checked)} />
        Approve permission requests automatically
      </label>
      <EnvVarsEditor value={env} onChange={setEnv} />
      <McpServersEditor value={mcpServers} onChange={setMcpServers} />
      {/* The names both editors' secret fields suggest (one list for the form). */}
      <SecretNames />
      {view}
      <div className="actions">
        <button type="button" onClick={onDone}>
          Cancel
        </button>
        <button className="primary" type="submit">
          Save profile
        </button>
      </div>
    </form>
  );
}
