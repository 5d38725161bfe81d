// Workspace-level data shared by the pages (boards, repositories, profiles): two live queries,
// `workspace:<id>` (workflows and repositories) and `profiles`, and the list of workspaces.
import { createContext, useCallback, useContext, useState } from 'react';
import { call } from '../api/client';
import type { AgentProfileDto, Notification, RepositoryDto, WorkflowDto, WorkspaceDto } from '../api/types';
import { removeById, upsertById } from './lists';
import { useLiveQuery } from './useLiveQuery';
import { useRead } from './useRead';
import { readPref, writePref } from './prefs';

/** Where a list's first read is: under way, failed (its error is shown), or answered. */
export type ReadState = 'reading' | 'failed' | 'done';

/** The state of a live query's first read. */
export function readState(query: { data: unknown; error: string | null }): ReadState {
  if (query.data !== null) return 'done';
  return query.error === null ? 'reading' : 'failed';
}

export interface WorkspaceData {
  workspaces: WorkspaceDto[];
  workspace: WorkspaceDto | null;
  setWorkspaceId: (id: string) => void;
  workflows: WorkflowDto[];
  workflow: WorkflowDto | null;
  setWorkflowId: (id: string) => void;
  repositories: RepositoryDto[];
  /** The workspace's workflows and repositories' first read. */
  listsRead: ReadState;
  profiles: AgentProfileDto[];
  /** The profiles' first read (`profiles` is empty until it answers). */
  profilesRead: ReadState;
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

// Remembering the chosen workspace and board is a convenience (lib/prefs).
const stored = readPref;
const store = writePref;

interface WorkspaceLists {
  workflows: WorkflowDto[];
  repositories: RepositoryDto[];
}

const readWorkspaces = () => call('workspace.list', {}).then((r) => r.workspaces);

const readProfiles = () => call('agent.profile.list', {}).then((r) => r.profiles);

/** `workspace:<id>` carries `{workflow}`, `{repository}` or, when deleted, `{id}`. */
function applyWorkspace(lists: WorkspaceLists, n: Notification): WorkspaceLists {
  const { action, payload: p } = n;
  switch (action) {
    case 'workflow.created':
    case 'workflow.updated':
      return { ...lists, workflows: upsertById(lists.workflows, p.workflow) };
    case 'workflow.deleted':
      return { ...lists, workflows: removeById(lists.workflows, p.id) };
    case 'repository.created':
    case 'repository.updated':
      return { ...lists, repositories: upsertById(lists.repositories, p.repository) };
    case 'repository.deleted':
      return { ...lists, repositories: removeById(lists.repositories, p.id) };
    default:
      return lists;
  }
}

/** `profiles` carries `{profile}` or, when deleted, `{id}`. */
function applyProfiles(profiles: AgentProfileDto[], n: Notification): AgentProfileDto[] {
  const { action, payload: p } = n;
  switch (action) {
    case 'agent.profile.created':
    case 'agent.profile.updated':
      return upsertById(profiles, p.profile);
    case 'agent.profile.deleted':
      return removeById(profiles, p.id);
    default:
      return profiles;
  }
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
    listsRead: readState(lists),
    profiles: profiles.data ?? [],
    profilesRead: readState(profiles),
    reload,
    error: workspaceList.error ?? lists.error ?? profiles.error,
  };
}
