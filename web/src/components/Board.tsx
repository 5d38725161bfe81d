// The board: one virtualized column per step, live over `workspace:<id>`, drag and drop and
// keyboard moves (Alt+arrows, or [ and ]), search, create and archive.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { call, errorText } from '../api/client';
import { live } from '../api/live';
import type { Notification, StepDto, TaskDto } from '../api/types';
import { useData } from '../lib/data';
import { navigate, taskPath } from '../lib/router';
import { VirtualList, type VirtualHandle } from '../lib/VirtualList';
import { CreateTaskDialog } from './CreateTaskDialog';
import { StateBadge } from './StateBadge';

interface BoardState {
  tasks: Map<string, TaskDto>;
  columns: Map<string, string[]>;
}

const PAGE = 1000;

function place(state: BoardState, task: TaskDto): BoardState {
  const tasks = new Map(state.tasks);
  const columns = new Map(state.columns);
  for (const [step, ids] of columns) {
    if (ids.includes(task.id)) columns.set(step, ids.filter((id) => id !== task.id));
  }
  if (task.archived_at) {
    tasks.delete(task.id);
    return { tasks, columns };
  }
  tasks.set(task.id, task);
  const column = [...(columns.get(task.step_id) ?? [])];
  column.splice(Math.min(task.position, column.length), 0, task.id);
  columns.set(task.step_id, column);
  return { tasks, columns };
}

function remove(state: BoardState, id: string): BoardState {
  const tasks = new Map(state.tasks);
  tasks.delete(id);
  const columns = new Map(state.columns);
  for (const [step, ids] of columns) {
    if (ids.includes(id)) columns.set(step, ids.filter((x) => x !== id));
  }
  return { tasks, columns };
}

function matches(task: TaskDto, query: string): boolean {
  if (!query) return true;
  const q = query.toLowerCase();
  return task.title.toLowerCase().includes(q) || task.description.toLowerCase().includes(q);
}

export function Board() {
  const { workspace, workflow, repositories } = useData();
  const [state, setState] = useState<BoardState>({ tasks: new Map(), columns: new Map() });
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [query, setQuery] = useState('');
  const [creating, setCreating] = useState(false);
  const [mobileStep, setMobileStep] = useState<string | null>(null);
  const [focusId, setFocusId] = useState<string | null>(null);
  const [announce, setAnnounce] = useState('');
  const handles = useRef(new Map<string, VirtualHandle | null>());
  const steps = useMemo(
    () => [...(workflow?.steps ?? [])].sort((a, b) => a.position - b.position),
    [workflow],
  );
  const workflowId = workflow?.id;

  const load = useCallback(async () => {
    if (!workflowId) return;
    const all: TaskDto[] = [];
    let cursor: string | null = null;
    do {
      const page: { tasks: TaskDto[]; next_cursor: string | null } = await call('task.list', {
        workflow_id: workflowId,
        include_archived: false,
        limit: PAGE,
        ...(cursor ? { cursor } : {}),
      });
      all.push(...page.tasks);
      cursor = page.next_cursor;
    } while (cursor);
    const columns = new Map<string, string[]>();
    const tasks = new Map<string, TaskDto>();
    all.sort((a, b) => a.position - b.position);
    for (const t of all) {
      tasks.set(t.id, t);
      const col = columns.get(t.step_id) ?? [];
      col.push(t.id);
      columns.set(t.step_id, col);
    }
    setState({ tasks, columns });
    setLoaded(true);
    setError(null);
  }, [workflowId]);

  useEffect(() => {
    if (!workspace || !workflowId) return;
    setLoaded(false);
    let stop = false;
    // Notifications that arrive while the first read is in flight are applied after it.
    let buffer: Notification[] | null = [];
    const apply = (n: Notification) => {
      const task = 'task' in n.payload ? n.payload.task : undefined;
      if (n.action === 'task.deleted') {
        const id = (n.payload.id as string | undefined) ?? task?.id;
        if (id) setState((s) => remove(s, id));
        return;
      }
      if (!task || task.workflow_id !== workflowId) return;
      if (n.action === 'task.updated') {
        setState((s) => {
          const old = s.tasks.get(task.id);
          if (old && old.step_id === task.step_id && !task.archived_at) {
            const tasks = new Map(s.tasks);
            tasks.set(task.id, task);
            return { ...s, tasks };
          }
          return place(s, task);
        });
      } else if (n.action.startsWith('task.')) {
        setState((s) => place(s, task));
      }
    };
    const first = () =>
      load()
        .then(() => {
          if (stop) return;
          const pending = buffer ?? [];
          buffer = null;
          pending.forEach(apply);
        })
        .catch((e: unknown) => !stop && setError(errorText(e)));
    // Read afresh, applying what arrives meanwhile after the read.
    const reload = () => {
      buffer = [];
      first();
    };
    const sub = live.subscribe(
      `workspace:${workspace.id}`,
      (n) => {
        if (buffer) buffer.push(n);
        else apply(n);
      },
      reload,
    );
    sub.ready.then(first);
    // The replay brings what was missed; a reload also covers a server whose log was reset.
    const off = live.onReconnect(reload);
    return () => {
      stop = true;
      sub.close();
      off();
    };
  }, [workspace?.id, workflowId, load]);

  useEffect(() => {
    if (!focusId) return;
    const el = document.querySelector<HTMLElement>(`[data-task-id="${CSS.escape(focusId)}"]`);
    if (el) {
      el.focus();
      setFocusId(null);
    }
  });

  const move = async (task: TaskDto, stepId: string, position: number) => {
    const optimistic = { ...task, step_id: stepId, position };
    setState((s) => place(s, optimistic));
    try {
      await call('task.move', { id: task.id, step_id: stepId, position });
    } catch (e) {
      setError(errorText(e));
      load().catch(() => {});
    }
  };

  const onKeyMove = (task: TaskDto, key: string) => {
    const stepIndex = steps.findIndex((s) => s.id === task.step_id);
    const column = state.columns.get(task.step_id) ?? [];
    const index = column.indexOf(task.id);
    let target: { step: StepDto; position: number } | null = null;
    if (key === 'left' && stepIndex > 0) {
      const step = steps[stepIndex - 1]!;
      target = { step, position: (state.columns.get(step.id) ?? []).length };
    } else if (key === 'right' && stepIndex < steps.length - 1) {
      const step = steps[stepIndex + 1]!;
      target = { step, position: (state.columns.get(step.id) ?? []).length };
    } else if (key === 'up' && index > 0) {
      target = { step: steps[stepIndex]!, position: index - 1 };
    } else if (key === 'down' && index < column.length - 1) {
      target = { step: steps[stepIndex]!, position: index + 1 };
    }
    if (!target) return;
    setFocusId(task.id);
    setAnnounce(`Moved “${task.title}” to ${target.step.name}, position ${target.position + 1}`);
    if (target.step.id !== task.step_id) setMobileStep(target.step.id);
    void move(task, target.step.id, target.position);
    window.requestAnimationFrame(() => handles.current.get(target.step.id)?.scrollToIndex(target.position));
  };

  const archive = async (task: TaskDto) => {
    setState((s) => remove(s, task.id));
    try {
      await call('task.archive', { id: task.id });
      setAnnounce(`Archived “${task.title}”`);
    } catch (e) {
      setError(errorText(e));
      load().catch(() => {});
    }
  };

  const repoName = (ids: string[]) =>
    ids.map((id) => repositories.find((r) => r.id === id)?.name).filter(Boolean).join(', ');

  if (!workflow) {
    return <div className="empty-page">Loading the board…</div>;
  }
  // A blocker is done in its workflow's last step or archived (archived tasks are not here).
  const lastStep = steps[steps.length - 1]?.id;
  const openBlockers = (task: TaskDto): TaskDto[] =>
    task.blocked_by
      .map((id) => state.tasks.get(id))
      .filter((b): b is TaskDto => !!b && b.step_id !== lastStep && !b.archived_at);
  const subtaskCount = (task: TaskDto): number =>
    [...state.tasks.values()].filter((t) => t.parent_id === task.id && !t.archived_at).length;
  const activeMobile = mobileStep && steps.some((s) => s.id === mobileStep) ? mobileStep : steps[0]?.id;

  return (
    <div className="board-page">
      <div className="toolbar">
        <h1 className="board-title">{workflow.name}</h1>
        <label className="search">
          <span className="sr-only">Search tasks</span>
          <input
            type="search"
            placeholder="Search tasks"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            aria-label="Search tasks"
          />
        </label>
        <button className="primary" onClick={() => setCreating(true)}>
          New task
        </button>
      </div>
      {error && (
        <div className="banner error" role="alert">
          {error}
          <button className="link" onClick={() => setError(null)}>
            Dismiss
          </button>
        </div>
      )}
      <div className="sr-only" aria-live="polite">
        {announce}
      </div>
      <nav className="step-switcher" role="tablist" aria-label="Steps">
        {steps.map((step) => (
          <button
            key={step.id}
            role="tab"
            aria-selected={step.id === activeMobile}
            className={step.id === activeMobile ? 'active' : ''}
            onClick={() => setMobileStep(step.id)}
          >
            {step.name} <span className="count">{(state.columns.get(step.id) ?? []).length}</span>
          </button>
        ))}
      </nav>
      <div className="columns" data-loaded={loaded ? 'true' : 'false'}>
        {steps.map((step) => {
          const ids = state.columns.get(step.id) ?? [];
          const visible = ids
            .map((id) => state.tasks.get(id))
            .filter((t): t is TaskDto => !!t && matches(t, query));
          return (
            <Column
              key={step.id}
              step={step}
              total={ids.length}
              tasks={visible}
              active={step.id === activeMobile}
              handle={(h) => handles.current.set(step.id, h)}
              onDrop={(taskId, visibleIndex) => {
                const task = state.tasks.get(taskId);
                if (!task) return;
                // map an index among the shown cards to one among all cards of the step
                const before = visible[visibleIndex];
                let position = before ? ids.indexOf(before.id) : ids.length;
                const from = ids.indexOf(taskId);
                if (from !== -1 && from < position) position -= 1;
                if (task.step_id === step.id && from === position) return;
                void move(task, step.id, Math.max(0, position));
              }}
              renderCard={(task) => (
                <Card
                  task={task}
                  blockers={openBlockers(task)}
                  subtasks={subtaskCount(task)}
                  repo={repoName(task.repository_ids)}
                  onKeyMove={onKeyMove}
                  onArchive={archive}
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
            setState((s) => place(s, task));
            setCreating(false);
          }}
        />
      )}
    </div>
  );
}

interface ColumnProps {
  step: StepDto;
  total: number;
  tasks: TaskDto[];
  active: boolean;
  handle: (h: VirtualHandle | null) => void;
  onDrop: (taskId: string, index: number) => void;
  renderCard: (task: TaskDto) => React.ReactNode;
}

const getKey = (t: TaskDto) => t.id;

function Column({ step, total, tasks, active, handle, onDrop, renderCard }: ColumnProps) {
  const [over, setOver] = useState<number | null>(null);
  const vref = useRef<VirtualHandle | null>(null);
  const setHandle = useCallback(
    (h: VirtualHandle | null) => {
      vref.current = h;
      handle(h);
    },
    [handle],
  );
  const titleId = `col-${step.id}`;
  return (
    <section
      className={`column ${active ? 'active' : ''} ${over !== null ? 'drop-target' : ''}`}
      aria-labelledby={titleId}
      data-step-id={step.id}
      data-step-name={step.name}
      onDragOver={(e) => {
        if (!e.dataTransfer.types.includes('application/x-kandev-task')) return;
        e.preventDefault();
        e.dataTransfer.dropEffect = 'move';
        setOver(vref.current?.indexAt(e.clientY) ?? tasks.length);
      }}
      onDragLeave={(e) => {
        if (!e.currentTarget.contains(e.relatedTarget as Node | null)) setOver(null);
      }}
      onDrop={(e) => {
        e.preventDefault();
        const id = e.dataTransfer.getData('application/x-kandev-task');
        const index = vref.current?.indexAt(e.clientY) ?? tasks.length;
        setOver(null);
        if (id) onDrop(id, index);
      }}
    >
      <header className="column-head">
        <span className="dot" style={{ background: step.color || 'var(--muted)' }} aria-hidden="true" />
        <h2 id={titleId}>{step.name}</h2>
        <span className="count" aria-label={`${total} tasks`} data-testid="column-count">
          {total}
        </span>
      </header>
      <VirtualList
        items={tasks}
        getKey={getKey}
        estimate={86}
        gap={8}
        handle={setHandle}
        className="column-body"
        role="list"
        ariaLabel={`${step.name} tasks`}
        render={(task) => renderCard(task)}
        empty={<p className="column-empty">No tasks</p>}
      />
    </section>
  );
}

interface CardProps {
  task: TaskDto;
  /** Its blockers that are not done yet. */
  blockers: TaskDto[];
  subtasks: number;
  repo: string;
  onKeyMove: (task: TaskDto, dir: 'left' | 'right' | 'up' | 'down') => void;
  onArchive: (task: TaskDto) => void;
}

function Card({ task, blockers, subtasks, repo, onKeyMove, onArchive }: CardProps) {
  const open = () => navigate(taskPath(task.id));
  return (
    <article
      className="card"
      role="listitem"
      tabIndex={0}
      draggable
      data-task-id={task.id}
      aria-label={`${task.title}. ${task.state.toLowerCase().replace(/_/g, ' ')}. Alt+arrow keys move it.`}
      onDragStart={(e) => {
        e.dataTransfer.setData('application/x-kandev-task', task.id);
        e.dataTransfer.effectAllowed = 'move';
      }}
      onClick={(e) => {
        if ((e.target as HTMLElement).closest('button')) return;
        open();
      }}
      onKeyDown={(e) => {
        if (e.target !== e.currentTarget) return;
        const alt = e.altKey;
        if (e.key === 'Enter') {
          e.preventDefault();
          open();
        } else if ((alt && e.key === 'ArrowLeft') || e.key === '[') {
          e.preventDefault();
          onKeyMove(task, 'left');
        } else if ((alt && e.key === 'ArrowRight') || e.key === ']') {
          e.preventDefault();
          onKeyMove(task, 'right');
        } else if (alt && e.key === 'ArrowUp') {
          e.preventDefault();
          onKeyMove(task, 'up');
        } else if (alt && e.key === 'ArrowDown') {
          e.preventDefault();
          onKeyMove(task, 'down');
        }
      }}
    >
      <div className="card-title">{task.title}</div>
      <div className="card-meta">
        <StateBadge state={task.state} />
        {blockers.length > 0 && (
          <span
            className="badge blocked"
            data-testid="blocked-by"
            title={`Waits for: ${blockers.map((b) => b.title).join(', ')}`}
          >
            blocked by {blockers.length}
          </span>
        )}
        {subtasks > 0 && (
          <span className="badge" data-testid="subtask-count" title="Subtasks">
            {subtasks} subtask{subtasks === 1 ? '' : 's'}
          </span>
        )}
        {repo && <span className="repo" title="Repository">{repo}</span>}
        <button
          className="icon archive"
          aria-label={`Archive ${task.title}`}
          title="Archive"
          onClick={() => onArchive(task)}
        >
          ⤓
        </button>
      </div>
    </article>
  );
}
