// The shell: header (workspace, board, connection state), and the page for the route.
import { type ReactNode, useCallback, useEffect, useRef, useState } from 'react';
import { live, type ConnectionStatus } from './api/live';
import { AccountPage } from './components/AccountPage';
import { Board } from './components/board/Board';
import { ErrorBanner } from './components/ErrorBanner';
import { GlobalSearch, useSearchShortcut } from './components/GlobalSearch';
import { Settings } from './components/settings/Settings';
import { TaskPage } from './components/TaskPage';
import { UserMenu } from './components/UserMenu';
import { Toasts } from './lib/toast';
import { DataContext, useWorkspaceData, type WorkspaceData } from './lib/data';
import { MeContext, useMeRead } from './lib/me';
import { canSomewhere, sameGrants } from './lib/roles';
import { navigate, useRoute } from './lib/router';
import type { Read } from './lib/useRead';
import type { Me } from './api/types';
import { useBrowserNotifications } from './lib/notify';
import { NeedsYouElsewhere } from './components/NeedsYouElsewhere';
import { NEW_WORKSPACE, NewWorkspaceDialog } from './components/NewWorkspaceDialog';

function useConnection(): ConnectionStatus {
  const [status, setStatus] = useState<ConnectionStatus>(live.status);
  useEffect(() => live.onStatus(setStatus), []);
  return status;
}

export function App() {
  const data = useWorkspaceData();
  const me = useMeRead();
  // Roles changed (the server closed this page's socket, it reconnected and `user.me` answers
  // otherwise): the workspaces this person sees may have changed too.
  const grantsSeen = useRef(me.data);
  const { reload } = data;
  useEffect(() => {
    const before = grantsSeen.current;
    grantsSeen.current = me.data;
    if (before && me.data && !sameGrants(before, me.data)) reload();
  }, [me.data, reload]);
  const route = useRoute();
  const connection = useConnection();
  const [searching, setSearching] = useState(false);
  const openSearch = useCallback(() => setSearching(true), []);
  useSearchShortcut(openSearch);
  const notifications = useBrowserNotifications();
  const [creatingWorkspace, setCreatingWorkspace] = useState(false);
  // A new workspace is for an admin of some workspace (and the owner).
  const mayCreateWorkspace = me.data ? canSomewhere(me.data, 'admin') : me.error !== null;

  return (
    <Shared data={data} me={me}>
      <div className={`app page-${route.page}`}>
        <header className="topbar">
          <a
            className="brand"
            href="/"
            onClick={(e) => {
              e.preventDefault();
              navigate('/');
            }}
          >
            <img src="/favicon.svg" alt="" width="22" height="22" />
            <span>Kandev</span>
          </a>
          {data.workspaces.length > 0 && (
            <label className="compact">
              <span className="sr-only">Workspace</span>
              <select
                aria-label="Workspace"
                value={data.workspace?.id ?? ''}
                onChange={(e) => {
                  if (e.target.value === NEW_WORKSPACE) setCreatingWorkspace(true);
                  else data.setWorkspaceId(e.target.value);
                }}
              >
                {data.workspaces.map((w) => (
                  <option key={w.id} value={w.id}>
                    {w.name}
                  </option>
                ))}
                {mayCreateWorkspace && <option value={NEW_WORKSPACE}>New workspace…</option>}
              </select>
            </label>
          )}
          {route.page === 'board' && data.workflows.length > 0 && (
            <label className="compact">
              <span className="sr-only">Board</span>
              <select
                aria-label="Board"
                value={data.workflow?.id ?? ''}
                onChange={(e) => data.setWorkflowId(e.target.value)}
              >
                {data.workflows.map((w) => (
                  <option key={w.id} value={w.id}>
                    {w.name}
                  </option>
                ))}
              </select>
            </label>
          )}
          <span className="spacer" />
          <NeedsYouElsewhere />
          <button className="navlink" onClick={openSearch} title="Search tasks and messages (Ctrl+K)">
            Search
          </button>
          {notifications.permission === 'default' && (
            <button
              className="navlink notify-me"
              onClick={notifications.ask}
              title="Get a system notification when an agent needs you while this tab is in the background"
            >
              Notify me
            </button>
          )}
          <span
            className={`conn conn-${connection}`}
            role="status"
            aria-live="polite"
            data-testid="connection"
            title={connection === 'open' ? 'Live updates are on' : 'Reconnecting to the server'}
          >
            {connection === 'open' ? 'Live' : connection === 'connecting' ? 'Connecting…' : 'Reconnecting…'}
          </span>
          <a
            className={`navlink ${route.page === 'settings' ? 'active' : ''}`}
            href="/settings"
            onClick={(e) => {
              e.preventDefault();
              navigate('/settings');
            }}
          >
            Settings
          </a>
          <UserMenu />
        </header>
        <ErrorBanner error={data.error} onRetry={data.reload} testId="data-error" />
        <main className="content">
          {route.page === 'board' && <Board />}
          {route.page === 'task' && (
            <TaskPage taskId={route.taskId} sessionId={route.sessionId} tab={route.tab} />
          )}
          {route.page === 'settings' && <Settings section={route.section} />}
          {route.page === 'account' && <AccountPage />}
        </main>
        <Toasts />
        {creatingWorkspace && (
          <NewWorkspaceDialog
            onClose={() => setCreatingWorkspace(false)}
            onCreated={(id) => {
              setCreatingWorkspace(false);
              data.setWorkspaceId(id);
              data.reload(); // the workspace list is read, not followed
              navigate('/');
            }}
          />
        )}
        {searching && <GlobalSearch onClose={() => setSearching(false)} />}
      </div>
    </Shared>
  );
}

/** What every page reads: the workspace's data and who is signed in. */
function Shared({ data, me, children }: { data: WorkspaceData; me: Read<Me>; children: ReactNode }) {
  return (
    <DataContext.Provider value={data}>
      <MeContext.Provider value={me}>{children}</MeContext.Provider>
    </DataContext.Provider>
  );
}
