// One step's column: a virtualized list of cards and a drop target for dragged cards (the
// drop's index among the shown cards is passed up; see `dropPosition`).
import { useCallback, useRef, useState } from 'react';
import type { StepDto, TaskCardDto } from '../../api/types';
import { VirtualList, type VirtualHandle } from '../../lib/VirtualList';

/** The drag data type of a card (its task id). */
export const TASK_DRAG_TYPE = 'application/x-kandev-task';

interface ColumnProps {
  step: StepDto;
  total: number;
  /** A search hides some cards: the count says how many match. */
  filtered: boolean;
  /** The board's first read has not answered: no count, and no "No tasks" yet. */
  loading: boolean;
  tasks: TaskCardDto[];
  active: boolean;
  handle: (h: VirtualHandle | null) => void;
  onDrop: (taskId: string, index: number) => void;
  renderCard: (task: TaskCardDto) => React.ReactNode;
}

const getKey = (t: TaskCardDto) => t.id;

export function Column(props: ColumnProps) {
  const { step, total, filtered, loading, tasks, active, handle, onDrop, renderCard } = props;
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
        if (!e.dataTransfer.types.includes(TASK_DRAG_TYPE)) return;
        e.preventDefault();
        e.dataTransfer.dropEffect = 'move';
        setOver(vref.current?.indexAt(e.clientY) ?? tasks.length);
      }}
      onDragLeave={(e) => {
        if (!e.currentTarget.contains(e.relatedTarget as Node | null)) setOver(null);
      }}
      onDrop={(e) => {
        e.preventDefault();
        const id = e.dataTransfer.getData(TASK_DRAG_TYPE);
        const index = vref.current?.indexAt(e.clientY) ?? tasks.length;
        setOver(null);
        if (id) onDrop(id, index);
      }}
    >
      <header className="column-head">
        <span className="dot" style={{ background: step.color || 'var(--muted)' }} aria-hidden="true" />
        <h2 id={titleId}>{step.name}</h2>
        <span
          className="count"
          aria-label={loading ? 'counting the tasks' : filtered ? `${tasks.length} of ${total} tasks match` : `${total} tasks`}
          data-testid="column-count"
        >
          {loading ? '…' : filtered ? `${tasks.length} of ${total}` : total}
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
        empty={<p className="column-empty">{loading ? 'Reading the tasks…' : filtered ? 'No matching tasks' : 'No tasks'}</p>}
      />
    </section>
  );
}
