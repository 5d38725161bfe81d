// The form that creates or edits an agent profile: its agent, command (or a version of the
// agent installed by Kandev, with an update to a newer one, issue 51), model and mode, its
// environment variables (secrets, or references to stored ones) and extra MCP servers.
import { useCallback, useState } from 'react';
import { call } from '../../api/client';
import type { AgentKind, AgentKindDto, AgentProfileDto } from '../../api/types';
import { updateTarget } from '../../lib/agentVersions';
import { fromEnv, toEnv } from '../../lib/envVars';
import { useRead } from '../../lib/useRead';
import { EnvVarsEditor } from './EnvVarsEditor';
import { McpServersEditor, fromMcpServers, toMcpServers } from './McpServersEditor';
import { SecretNames } from './SecretNames';
import { useFormError } from './useFormError';

/** The form's words for the fields a refusal may start with. */
const LABELS = {
  name: 'Name',
  command: 'Command',
  agent_version: 'Version',
  args: 'Arguments',
  model: 'Model',
  mode: 'Mode',
  env: 'Environment variable',
  mcp_servers: 'MCP server',
};

/** The kinds offered before `agent.kinds` answers. */
const KINDS: AgentKindDto[] = ['mock', 'claude', 'codex', 'gemini', 'opencode', 'qwen', 'kilo', 'copilot', 'auggie', 'custom'];

export function ProfileForm({
  kinds,
  profile,
  onKindsChanged,
  onDone,
}: {
  kinds: AgentKind[];
  profile: AgentProfileDto | null;
  /** The versions Kandev installed changed (an update installed one). */
  onKindsChanged: () => void;
  onDone: () => void;
}) {
  const [name, setName] = useState(profile?.name ?? '');
  const [kind, setKind] = useState(profile?.kind ?? 'mock');
  const [command, setCommand] = useState(profile?.command ?? '');
  // '' runs the command on PATH.
  const [agentVersion, setAgentVersion] = useState(profile?.agent_version ?? '');
  const [args, setArgs] = useState(profile?.args.join(' ') ?? '');
  const [model, setModel] = useState(profile?.model ?? '');
  const [mode, setMode] = useState(profile?.mode ?? '');
  const [autoApprove, setAutoApprove] = useState(profile?.auto_approve ?? false);
  const [mcpServers, setMcpServers] = useState(() => fromMcpServers(profile?.mcp_servers ?? []));
  const [env, setEnv] = useState(() => fromEnv(profile?.env ?? []));
  const { wrap, view } = useFormError(LABELS);
  const argList = args.split(/\s+/).filter(Boolean);
  const kindInfo = kinds.find((k) => k.kind === kind);
  const ownCommand = command.trim() !== '';
  // What the save sends: a version for a kind Kandev installs, none with a command of the
  // profile's own; unchanged (undefined) while the kinds are not read.
  const versionField = kindInfo?.package ? (ownCommand ? null : agentVersion || null) : undefined;
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
                agent_version: versionField,
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
                agent_version: versionField ?? undefined,
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
          <select
            value={kind}
            disabled={!!profile}
            onChange={(e) => {
              setKind(e.target.value as AgentKindDto);
              setAgentVersion('');
            }}
          >
            {(kinds.length ? kinds : KINDS.map((k) => ({ kind: k, title: k }))).map((k) => (
              <option key={k.kind} value={k.kind}>
                {k.title}
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
        {kindInfo?.package && (
          <VersionPicker
            kind={kindInfo}
            profile={profile}
            value={ownCommand ? '' : agentVersion}
            disabled={ownCommand}
            onChange={setAgentVersion}
            onUpdated={(version) => {
              setAgentVersion(version);
              onKindsChanged();
            }}
          />
        )}
      </div>
      <div className="row">
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

/**
 * The profile's version of its agent: the command on PATH, or one Kandev installed. A saved
 * profile that runs an older version than one installed or offered by the registry gets
 * "Update to X": X is installed (if it is not) and saved as the profile's version at once.
 */
function VersionPicker({
  kind,
  profile,
  value,
  disabled,
  onChange,
  onUpdated,
}: {
  kind: AgentKind;
  profile: AgentProfileDto | null;
  value: string;
  disabled: boolean;
  onChange: (version: string) => void;
  onUpdated: (version: string) => void;
}) {
  // The version saved in the profile (an update saves one).
  const [saved, setSaved] = useState(profile?.agent_version ?? null);
  const [updating, setUpdating] = useState<string | null>(null);
  const { wrap, view } = useFormError(LABELS);
  // The registry is asked only for a saved profile that runs a version (else there is nothing
  // to update); its failure only means no update is offered beyond the installed versions.
  const asks = profile !== null && saved !== null;
  const load = useCallback(
    () => (asks ? call('agent.versions', { kind: kind.kind }).then((v) => v.available) : Promise.resolve([] as string[])),
    [asks, kind.kind],
  );
  const available = useRead(load).data ?? [];
  const target = disabled ? null : updateTarget(saved, kind.installed_versions, available);
  const options = kind.installed_versions.includes(value) || !value ? kind.installed_versions : [value, ...kind.installed_versions];
  const update = async (version: string) => {
    if (!profile) return;
    setUpdating(version);
    try {
      await wrap(async () => {
        await call('agent.install', { kind: kind.kind, version });
        await call('agent.profile.update', { id: profile.id, agent_version: version });
        setSaved(version);
        onUpdated(version);
      });
    } finally {
      setUpdating(null);
    }
  };
  return (
    <div className="version-picker">
      <label>
        Version{' '}
        <span className="hint">
          {disabled ? 'the profile’s own command runs' : kind.installed_versions.length ? '' : 'install versions with Versions… below'}
        </span>
        <select value={value} disabled={disabled || updating !== null} onChange={(e) => onChange(e.target.value)}>
          <option value="">The command on PATH</option>
          {options.map((v) => (
            <option key={v} value={v}>
              {v}
              {kind.installed_versions.includes(v) ? ' (installed by Kandev)' : ' (not installed)'}
            </option>
          ))}
        </select>
      </label>
      {target && (
        <button type="button" disabled={updating !== null} onClick={() => void update(target)}>
          Update to {target}
        </button>
      )}
      {updating && (
        <p className="hint" role="status">
          <progress aria-label="In progress" /> Installing {kind.title} {updating} with npm and saving it as this profile’s version… this
          can take a minute.
        </p>
      )}
      {view}
    </div>
  );
}
