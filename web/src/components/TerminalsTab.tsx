// The task page's Terminal tab: shells in the task's worktree (several, each in its own
// xterm.js, living on the server until closed, so a reload or a reconnect shows them again
// with their recent output) and the task's dev servers with their log and a preview link.
// Issue 49: a terminal is an admin's of the task's workspace, a shell on the server; starting
// and stopping the dev server a member's; its log (read-only) anyone's who reads the task.
import { useCallback, useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { DevServerDto, TerminalDto } from '../api/types';
import { useRole } from '../lib/me';
import { useMutation } from '../lib/useMutation';
import { ErrorBanner } from './ErrorBanner';
import { RoleNote } from './RoleNote';
import { XtermView } from './XtermView';

export function TerminalsTab(props: { taskId: string; workspaceId: string; archived: boolean }) {
  const role = useRole(props.workspaceId);
  const works = role.can('member');
  const shell = role.can('admin');
  const [terminals, setTerminals] = useState<TerminalDto[] | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [devServers, setDevServers] = useState<DevServerDto[]>([]);
  const { busy, error, setError, run } = useMutation();

  const load = useCallback(() => {
    Promise.all([call('terminal.list', { task_id: props.taskId }), call('devserver.list', { task_id: props.taskId })])
      .then(([t, d]) => {
        setTerminals(t.terminals);
        setDevServers(d.dev_servers);
        setSelected((s) => (s && t.terminals.some((x) => x.id === s) ? s : (t.terminals[0]?.id ?? null)));
      })
      .catch((e: unknown) => setError(errorText(e)));
  }, [props.taskId]);
  useEffect(load, [load]);

  const act = (work: () => Promise<unknown>) => void run(work);

  const openTerminal = () =>
    act(async () => {
      const { terminal } = await call('terminal.open', { task_id: props.taskId, cols: 80, rows: 24 });
      setTerminals((list) => [...(list ?? []), terminal]);
      setSelected(terminal.id);
    });
  const closeTerminal = (id: string) =>
    act(async () => {
      await call('terminal.close', { terminal_id: id });
      setTerminals((list) => (list ?? []).filter((t) => t.id !== id));
      setSelected((s) => (s === id ? null : s));
    });
  const startDevServer = () =>
    act(async () => {
      const { dev_server } = await call('devserver.start', { task_id: props.taskId });
      setDevServers((list) => [...list.filter((d) => d.repository_id !== dev_server.repository_id), dev_server]);
    });
  const stopDevServer = (d: DevServerDto) =>
    act(async () => {
      await call('devserver.stop', { task_id: props.taskId, repository_id: d.repository_id });
      setDevServers((list) => list.filter((x) => x.terminal_id !== d.terminal_id));
    });

  const current = terminals?.find((t) => t.id === selected) ?? null;

  return (
    <div className="terminals-tab">
      <ErrorBanner error={error} onDismiss={() => setError(null)} testId="terminal-error" />
      <section className="dev-servers" aria-label="Dev servers">
        <div className="row">
          <h2>Dev server</h2>
          <span className="spacer" />
          {works && !props.archived && (
            // One dev server at a time: Start waits until the running one stops.
            <button
              onClick={startDevServer}
              disabled={busy || devServers.some((d) => d.state === 'running')}
              title={devServers.some((d) => d.state === 'running') ? 'A dev server is running; stop it first' : undefined}
            >
              Start dev server
            </button>
          )}
        </div>
        {devServers.map((d) => (
          <div key={d.terminal_id} className="dev-server" data-testid="dev-server" data-port={d.port}>
            <div className="row">
              <a href={d.url} target="_blank" rel="noreferrer">
                Open preview ({d.url})
              </a>
              <span className="badge">{d.state}</span>
              <span className="spacer" />
              {works && (
                <button onClick={() => stopDevServer(d)} disabled={busy}>
                  Stop
                </button>
              )}
            </div>
            <XtermView terminalId={d.terminal_id} readOnly label={`Dev server log, port ${d.port}`} onExit={load} />
          </div>
        ))}
      </section>
      {!shell && (
        <RoleNote>
          Terminals are for admins of the workspace: a terminal is a shell on the server.
        </RoleNote>
      )}
      {shell && (
        <section className="user-terminals" aria-label="Terminals">
          <div className="tabs" role="tablist" aria-label="Terminals">
            {(terminals ?? []).map((t, i) => (
              <span key={t.id} className="terminal-tab">
                <button
                  role="tab"
                  aria-selected={t.id === selected}
                  className={t.id === selected ? 'active' : ''}
                  onClick={() => setSelected(t.id)}
                >
                  Terminal {i + 1}
                </button>
                <button className="icon" aria-label={`Close terminal ${i + 1}`} onClick={() => closeTerminal(t.id)}>
                  ×
                </button>
              </span>
            ))}
            {!props.archived && (
              <button className="tab-add" onClick={openTerminal} disabled={busy}>
                + Terminal
              </button>
            )}
          </div>
          {current ? (
            <XtermView key={current.id} terminalId={current.id} label={`Terminal ${(terminals ?? []).indexOf(current) + 1}`} />
          ) : (
            terminals && <p className="muted">No terminal is open. A terminal runs a shell in the task’s worktree.</p>
          )}
        </section>
      )}
    </div>
  );
}
