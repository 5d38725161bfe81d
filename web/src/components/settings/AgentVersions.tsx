// Settings › Agent profiles › an agent's versions (issue 51): the versions Kandev installed
// (with the profiles that run each, and Remove) and those the npm registry offers (Install).
// For admins only, as `agent.versions`, `agent.install` and `agent.uninstall` are; an install
// can take a minute, and the call answers when npm is done. "Where" chooses this machine's
// installs (local and container executors run them) or an SSH executor's build host's.
import { useCallback, useEffect, useState } from 'react';
import { call } from '../../api/client';
import type { AgentKind } from '../../api/types';
import { executorOf, firstToInstall, installPlaces, THIS_MACHINE } from '../../lib/agentVersions';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { useFormError } from './useFormError';

const readExecutors = () => call('executor.list', {}).then((r) => r.executors);

export function AgentVersions({ kind, onChanged, onClose }: { kind: AgentKind; onChanged: () => void; onClose: () => void }) {
  // A refused or failed executor list leaves this machine alone to choose.
  const executors = useRead(readExecutors);
  const places = installPlaces(executors.data);
  // '' is this machine; else an SSH executor's id, sent as `executor_id`.
  const [at, setAt] = useState('');
  const place = places.find((p) => p.id === at) ?? THIS_MACHINE;
  const load = useCallback(() => call('agent.versions', { kind: kind.kind, ...executorOf(at) }), [kind.kind, at]);
  const versions = useRead(load);
  const [pick, setPick] = useState('');
  // What runs now, in words ("Removing Qwen Code 1.0.0…"); null when nothing does.
  const [working, setWorking] = useState<string | null>(null);
  const { wrap, view } = useFormError();
  const data = versions.data;
  const installed = data?.installed.map((v) => v.version) ?? [];
  const available = data?.available ?? [];
  const start = data ? firstToInstall(available, data.latest, installed) : '';
  // The picker starts on the newest version to install, once the versions are read, and again
  // whenever the installed ones change (the one just installed is no choice any more).
  const installedKey = installed.join(' ');
  useEffect(() => setPick(start), [start, installedKey]);

  const act = async (doing: string, work: () => Promise<unknown>) => {
    setWorking(doing);
    try {
      await wrap(work);
    } finally {
      setWorking(null);
      versions.retry();
      onChanged();
    }
  };

  return (
    <section className="card-form form agent-versions" aria-label={`${kind.title} versions`} data-testid="agent-versions">
      <div className="settings-head">
        <h2>
          {kind.title} versions {data && <code className="hint">{data.package}</code>}
        </h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <label>
        Where
        <select value={place.id} onChange={(e) => setAt(e.target.value)} disabled={working !== null}>
          {places.map((p) => (
            <option key={p.id} value={p.id}>
              {p.label}
            </option>
          ))}
        </select>
      </label>
      {!data && !versions.error && <p className="hint">Asking the registry for the versions…</p>}
      <InlineError error={versions.error} onRetry={versions.retry} />
      {data && (
        <>
          <h3>Installed by Kandev {place.where}</h3>
          {data.installed.length === 0 ? (
            <p className="hint">None yet: install a version below, then choose it in a profile.</p>
          ) : (
            <table className="table" aria-label={`${kind.title} versions installed`}>
              <thead>
                <tr>
                  <th>Version</th>
                  <th>Command</th>
                  <th>Profiles running it</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {data.installed.map((v) => (
                  <tr key={v.version} data-version={v.version}>
                    <td>{v.version}</td>
                    <td>
                      <code>{v.path}</code>
                    </td>
                    <td>{v.profiles.join(', ') || 'none'}</td>
                    <td className="actions-cell">
                      <div className="row-actions">
                        <button
                          className="danger-outline"
                          disabled={working !== null}
                          onClick={() =>
                            void act(`Removing ${kind.title} ${v.version} ${place.where}…`, () => call('agent.uninstall', { kind: kind.kind, version: v.version, ...executorOf(place.id) }))
                          }
                        >
                          Remove
                        </button>
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h3>From the registry</h3>
          {data.registry_error !== null && (
            <p className="form-error" role="alert" data-testid="registry-error">
              The registry could not be asked for the versions: {data.registry_error}
            </p>
          )}
          {data.registry_error === null && available.length === 0 && <p className="hint">The registry offers no version.</p>}
          {available.length > 0 && (
            <form
              className="row"
              aria-label={`Install ${kind.title}`}
              onSubmit={(e) => {
                e.preventDefault();
                if (pick)
                  void act(`Installing ${kind.title} ${pick} with npm ${place.where}… this can take a minute.`, () =>
                    call('agent.install', { kind: kind.kind, version: pick, ...executorOf(place.id) }),
                  );
              }}
            >
              <label>
                Version to install
                <select value={pick} onChange={(e) => setPick(e.target.value)} disabled={working !== null}>
                  {available.map((v) => (
                    <option key={v} value={v} disabled={installed.includes(v)}>
                      {v}
                      {v === data.latest ? ' (latest)' : ''}
                      {installed.includes(v) ? ' (installed)' : ''}
                    </option>
                  ))}
                </select>
              </label>
              <div className="actions">
                <button className="primary" type="submit" disabled={working !== null || !pick || installed.includes(pick)}>
                  Install
                </button>
              </div>
            </form>
          )}
        </>
      )}
      {working && (
        <p className="hint" role="status" data-testid="agent-versions-progress">
          <progress aria-label="In progress" /> {working}
        </p>
      )}
      {view}
    </section>
  );
}
