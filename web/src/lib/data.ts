// Workspace-level data shared by the pages (boards, repositories, profiles), kept current by
// notifications on `workspace:<id>` and `profiles`.
import { createContext, useCallback, useContext, useEffect, useState } from 'react';
import { call } from '../api/client';
import { live } from '../api/live';
import type { AgentProfileDto, RepositoryDto, WorkflowDto, WorkspaceDto } from '../api/types';

export interface WorkspaceData {
  workspaces: WorkspaceDto[];
  workspace: WorkspaceDto | null;
  setWorkspaceId: (id: string) => void;
  workflows: WorkflowDto[];
  workflow: WorkflowDto | null;
  setWorkflowId: (id: string) => void;
  repositories: RepositoryDto[];
  profiles: AgentProfileDto[];
  reload: () => void;
  error: string | null;
}

export const DataContext = createContext<WorkspaceData | null>(null);

export function useData(): WorkspaceData {
  const data = useContext(DataContext);
  if (!data) throw new Error('useData outside DataContext');
  return data;
}

const stored = (key: string) => {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
};
const store = (key: string, value: string) => {
  try {
    localStorage.setItem(key, value);
  } catch {
    /* private mode */
  }
};

export function useWorkspaceData(): WorkspaceData {
  const [workspaces, setWorkspaces] = useState<WorkspaceDto[]>([]);
  const [workspaceId, setWorkspaceIdState] = useState<string | null>(stored('kandev.workspace'));
  const [workflows, setWorkflows] = useState<WorkflowDto[]>([]);
  const [workflowId, setWorkflowIdState] = useState<string | null>(stored('kandev.workflow'));
  const [repositories, setRepositories] = useState<RepositoryDto[]>([]);
  const [profiles, setProfiles] = useState<AgentProfileDto[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);

  useEffect(() => {
    let stop = false;
    call('workspace.list', {})
      .then((r) => {
        if (stop) return;
        setWorkspaces(r.workspaces);
        setError(null);
      })
      .catch((e: unknown) => setError(String((e as Error).message)));
    call('agent.profile.list', {})
      .then((r) => !stop && setProfiles(r.profiles))
      .catch(() => {});
    return () => {
      stop = true;
    };
  }, [tick]);

  const workspace =
    workspaces.find((w) => w.id === workspaceId) ?? workspaces[0] ?? null;

  useEffect(() => {
    if (!workspace) return;
    let stop = false;
    const load = () => {
      call('workflow.list', { workspace_id: workspace.id })
        .then((r) => !stop && setWorkflows(r.workflows))
        .catch(() => {});
      call('repository.list', { workspace_id: workspace.id })
        .then((r) => !stop && setRepositories(r.repositories))
        .catch(() => {});
    };
    const sub = live.subscribe(
      `workspace:${workspace.id}`,
      (n) => {
        if (n.action.startsWith('workflow.') || n.action.startsWith('repository.')) load();
      },
      load,
    );
    sub.ready.then(load);
    const offReconnect = live.onReconnect(load);
    return () => {
      stop = true;
      sub.close();
      offReconnect();
    };
  }, [workspace?.id, tick]);

  useEffect(() => {
    const loadProfiles = () => {
      call('agent.profile.list', {}).then((r) => setProfiles(r.profiles)).catch(() => {});
    };
    const sub = live.subscribe('profiles', loadProfiles, loadProfiles);
    return () => sub.close();
  }, []);

  const workflow = workflows.find((w) => w.id === workflowId) ?? workflows[0] ?? null;

  return {
    workspaces,
    workspace,
    setWorkspaceId: (id) => {
      store('kandev.workspace', id);
      setWorkspaceIdState(id);
    },
    workflows,
    workflow,
    setWorkflowId: (id) => {
      store('kandev.workflow', id);
      setWorkflowIdState(id);
    },
    repositories,
    profiles,
    reload,
    error,
  };
}
