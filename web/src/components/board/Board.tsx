// The board page: one column per step of the chosen workflow, search, create and archive. Its
// concerns live beside it: the live tasks (useBoardTasks), keyboard moves (useKeyboardMove),
// drag and drop (Column, Card, dropPosition), the phone layout (StepSwitcher), the archived
// tasks (ArchivedList) and the keys `n` (new task) and `/` (search).
import { useEffect, useMemo, useRef, useState } from 'react';
import { call } from '../../api/client';
import type { TaskCardDto } from '../../api/types';
import { useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { navigate } from '../../lib/router';
import { useSearch } from '../../lib/search';
import { usePageTitle } from '../../lib/title';
import { toast } from '../../lib/toast';
import type { VirtualHandle } from '../../lib/VirtualList';
import { ArchivedList } from './ArchivedList';
import { CreateTaskDialog } from '../CreateTaskDialog';
import { ErrorBanner } from '../ErrorBanner';
import { dropPosition, matches } from '../../lib/boardState';
import { Card } from './Card';
import { Column } from './Column';
import { StepSwitcher, usePhoneStep } from './StepSwitcher';
import { useBoardTasks } from './useBoardTasks';
import { useKeyboardMove } from './useKeyboardMove';

export function Board() {
  const { workspace, workflow, repositories } = useData();
  // Creating, moving and archiving tasks are a member's; a viewer reads the board (issue 49).
  const role = useRole();
  const works = role.can('member');
  const steps = useMemo(
    () => [...(workflow?.steps ?? [])].sort((a, b) => a.position - b.position),
    [workflow],
  );
  const tasks = useBoardTasks(workspace?.id ?? null, workflow?.id ?? null);
  const { board } = tasks;
  const [query, setQuery] = useState('');
  // Tasks whose title, description or transcript matches, by the server's full-text search;
  // cards match by title at once, while the search answers.
  const found = useSearch(workspace?.id, query, 200);
  const foundIds = useMemo(() => new Set(found.hits.map((h) => h.task_id)), [found.hits]);
  const [creating, setCreating] = useState(false);
  const [needsMe, setNeedsMe] = useState(false);
  const [showArchived, setShowArchived] = useState(false);
  const search = useRef<HTMLInputElement | null>(null);
  const [announce, setAnnounce] = useState('');
  const [phoneStep, showStep] = usePhoneStep(steps);
  const handles = useRef(new Map<string, VirtualHandle | null>());
  const onKeyMove = useKeyboardMove({
    steps,
    columns: board.columns,
    move: tasks.move,
    announce: setAnnounce,
    showStep,
    handles,
  });

  const archive = async (task: TaskCardDto) => {
    if (await tasks.archive(task)) {
      setAnnounce(`Archived “${task.title}”`);
      toast(`Archived “${task.title}”`, { undo: () => call('task.unarchive', { id: task.id }) });
    }
  };

  // The tab says how many tasks need their developer.
  let waiting = 0;
  for (const t of board.tasks.values()) if (t.needs_you) waiting++;
  usePageTitle(waiting > 0 ? `(${waiting}) Kandev` : 'Kandev', waiting > 0);

  // `n` a new task, `/` the search: not while typing or while a dialog is open.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
      const t = e.target as HTMLElement | null;
      if (t?.closest('input, textarea, select, [contenteditable="true"], dialog')) return;
      if (e.key === 'n' && works) {
        e.preventDefault();
        setCreating(true);
      } else if (e.key === '/') {
        e.preventDefault();
        search.current?.focus();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [works]);

  // A blocker is done in its workflow's last step or archived (archived tasks are not here).
  const lastStep = steps[steps.length - 1]?.id;
  const openBlockers = (task: TaskCardDto): TaskCardDto[] =>
    task.blocked_by
      .map((id) => board.tasks.get(id))
      .filter((b): b is TaskCardDto => !!b && b.step_id !== lastStep && !b.archived_at);
  const subtaskCount = (task: TaskCardDto): number =>
    [...board.tasks.values()].filter((t) => t.parent_id === task.id && !t.archived_at).length;

  const repoName = (ids: string[]) =>
    ids.map((id) => repositories.find((r) => r.id === id)?.name).filter(Boolean).join(', ');

  if (!workflow && role.me && !role.me.owner && role.me.roles.length === 0) {
    return (
      <div className="empty-page" data-testid="no-workspace">
        You are not a member of any workspace yet: ask an admin of one to add you.
      </div>
    );
  }
  if (!workflow) {
    return <div className="empty-page">Loading the board…</div>;
  }

  return (
    <div className="board-page">
      <div className="toolbar">
        <h1 className="board-title">{workflow.name}</h1>
        <label className="search">
          <span className="sr-only">Search tasks</span>
          <input
            ref={search}
            type="search"
            placeholder="Search tasks"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            aria-label="Search tasks"
            aria-keyshortcuts="/"
          />
        </label>
        <button
          aria-pressed={needsMe}
          className={needsMe ? 'toggle on' : 'toggle'}
          onClick={() => setNeedsMe(!needsMe)}
          title="Only the tasks that need you (a permission, a question, an error)"
        >
          Needs me{waiting > 0 ? ` (${waiting})` : ''}
        </button>
        <button
          aria-pressed={showArchived}
          className={showArchived ? 'toggle on' : 'toggle'}
          onClick={() => setShowArchived(!showArchived)}
        >
          Archived
        </button>
        {works && (
          <button className="primary" onClick={() => setCreating(true)} aria-keyshortcuts="n" title="New task (n)">
            New task
          </button>
        )}
      </div>
      <ErrorBanner error={tasks.error} onDismiss={tasks.dismissError} testId="board-error" />
      <div className="sr-only" aria-live="polite">
        {announce}
      </div>
      {tasks.loaded && board.tasks.size === 0 && repositories.length === 0 && !showArchived && (
        <div className="first-run" data-testid="first-run">
          <strong>Welcome to Kandev.</strong> Agents work in your code: add a repository in{' '}
          <a
            href="/settings/repositories"
            onClick={(e) => {
              e.preventDefault();
              navigate('/settings/repositories');
            }}
          >
            Settings → Repositories
          </a>
          , then create a task with <kbd>n</kbd> or New task.
        </div>
      )}
      {showArchived && workspace && <ArchivedList workspaceId={workspace.id} workflowId={workflow.id} restore={works} />}
      <StepSwitcher
        steps={steps}
        active={phoneStep}
        count={(stepId) => (board.columns.get(stepId) ?? []).length}
        onChoose={showStep}
      />
      <div className="columns" data-loaded={tasks.loaded ? 'true' : 'false'}>
        {steps.map((step) => {
          const ids = board.columns.get(step.id) ?? [];
          const visible = ids
            .map((id) => board.tasks.get(id))
            .filter((t): t is TaskCardDto => !!t && matches(t, query, foundIds) && (!needsMe || !!t.needs_you));
          return (
            <Column
              key={step.id}
              step={step}
              total={ids.length}
              filtered={query.trim() !== '' || needsMe}
              loading={!tasks.loaded && !tasks.error}
              tasks={visible}
              active={step.id === phoneStep}
              handle={(h) => handles.current.set(step.id, h)}
              onDrop={(taskId, visibleIndex) => {
                const task = board.tasks.get(taskId);
                if (!task || !works) return;
                const position = dropPosition(ids, visible, task, step.id, visibleIndex);
                if (position !== null) void tasks.move(task, step.id, position);
              }}
              renderCard={(task) => (
                <Card
                  task={task}
                  blockers={openBlockers(task)}
                  subtasks={subtaskCount(task)}
                  repo={repoName(task.repository_ids)}
                  onKeyMove={works ? onKeyMove : null}
                  onArchive={works ? archive : null}
                />
              )}
            />
          );
        })}
      </div>
      {creating && (
        <CreateTaskDialog
          workflow={workflow}
          onClose={() => setCreating(false)}
          onCreated={(task) => {
            tasks.add(task);
            setCreating(false);
          }}
        />
      )}
    </div>
  );
}
