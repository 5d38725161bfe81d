// Workspace-level data shared by the pages (boards, repositories, profiles): two live queries,
// `workspace:<id>` (workflows and repositories) and `profiles`, and the list of workspaces.
import { createContext, useCallback, useContext, useState } from 'react';
import { call } from '../api/client';
import type { AgentProfileDto, Notification, RepositoryDto, WorkflowDto, WorkspaceDto } from '../api/types';
import { removeById, upsertById } from './lists';
import { useLiveQuery, type LiveQueryControl } from './useLiveQuery';
import { useRead } from './useRead';

export interface WorkspaceData {
  workspaces: WorkspaceDto[];
  workspace: WorkspaceDto | null;
  setWorkspaceId: (id: string) => void;
  workflows: WorkflowDto[];
  workflow: WorkflowDto | null;
  setWorkflowId: (id: string) => void;
  repositories: RepositoryDto[];
  profiles: AgentProfileDto[];
  /** Reads everything afresh (the Retry of `error`). */
  reload: () => void;
  /** What could not be read, for a person. */
  error: string | null;
}

export const DataContext = createContext<WorkspaceData | null>(null);

export function useData(): WorkspaceData {
  const data = useContext(DataContext);
  if (!data) throw new Error('useData outside DataContext');
  return data;
}

// Remembering the chosen workspace and board is a convenience: where storage is refused
// (private mode, a full quota) the page works the same, starting from the first of each.
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
    /* not remembered: see above */
  }
};

interface WorkspaceLists {
  workflows: WorkflowDto[];
  repositories: RepositoryDto[];
}

const readWorkspaces = () => call('workspace.list', {}).then((r) => r.workspaces);

const readProfiles = () => call('agent.profile.list', {}).then((r) => r.profiles);

/** `workspace:<id>` carries `{workflow}`, `{repository}` or, when deleted, `{id}`. */
function applyWorkspace(
  lists: WorkspaceLists,
  n: Notification,
  control: LiveQueryControl<WorkspaceLists>,
): WorkspaceLists {
  const p = n.payload;
  if (n.action.startsWith('workflow.')) {
    const workflow = p.workflow as WorkflowDto | undefined;
    if (n.action === 'workflow.deleted' && typeof p.id === 'string') {
      return { ...lists, workflows: removeById(lists.workflows, p.id) };
    }
    if (workflow) return { ...lists, workflows: upsertById(lists.workflows, workflow) };
    control.reload(); // a shape this page does not know: read the lists
  } else if (n.action.startsWith('repository.')) {
    const repository = p.repository as RepositoryDto | undefined;
    if (n.action === 'repository.deleted' && typeof p.id === 'string') {
      return { ...lists, repositories: removeById(lists.repositories, p.id) };
    }
    if (repository) return { ...lists, repositories: upsertById(lists.repositories, repository) };
    control.reload();
  }
  return lists;
}

/** `profiles` carries `{profile}` or, when deleted, `{id}`. */
function applyProfiles(
  profiles: AgentProfileDto[],
  n: Notification,
  control: LiveQueryControl<AgentProfileDto[]>,
): AgentProfileDto[] {
  const p = n.payload;
  if (n.action === 'agent.profile.deleted' && typeof p.id === 'string') return removeById(profiles, p.id);
  const profile = p.profile as AgentProfileDto | undefined;
  if (profile) return upsertById(profiles, profile);
  control.reload();
  return profiles;
}

export function useWorkspaceData(): WorkspaceData {
  const workspaceList = useRead(readWorkspaces);
  const workspaces = workspaceList.data ?? [];
  const [workspaceId, setWorkspaceIdState] = useState<string | null>(stored('kandev.workspace'));
  const [workflowId, setWorkflowIdState] = useState<string | null>(stored('kandev.workflow'));
  const workspace = workspaces.find((w) => w.id === workspaceId) ?? workspaces[0] ?? null;

  const wsId = workspace?.id ?? null;
  const loadLists = useCallback(async (): Promise<WorkspaceLists> => {
    if (!wsId) throw new Error('no workspace');
    const [w, r] = await Promise.all([
      call('workflow.list', { workspace_id: wsId }),
      call('repository.list', { workspace_id: wsId }),
    ]);
    return { workflows: w.workflows, repositories: r.repositories };
  }, [wsId]);
  const lists = useLiveQuery(wsId ? `workspace:${wsId}` : null, loadLists, applyWorkspace);
  const profiles = useLiveQuery('profiles', readProfiles, applyProfiles);

  const workflows = lists.data?.workflows ?? [];
  const workflow = workflows.find((w) => w.id === workflowId) ?? workflows[0] ?? null;
  const { retry: retryWorkspaces } = workspaceList;
  const { reload: reloadLists } = lists;
  const { reload: reloadProfiles } = profiles;
  const reload = useCallback(() => {
    retryWorkspaces();
    reloadLists();
    reloadProfiles();
  }, [retryWorkspaces, reloadLists, reloadProfiles]);

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
    repositories: lists.data?.repositories ?? [],
    profiles: profiles.data ?? [],
    reload,
    error: workspaceList.error ?? lists.error ?? profiles.error,
  };
}
