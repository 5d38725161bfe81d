// The colored state pill of a task or session.
const LABELS: Record<string, string> = {
  TODO: 'to do',
  IN_PROGRESS: 'running',
  RUNNING: 'running',
  STARTING: 'starting',
  CREATED: 'new',
  WAITING_FOR_INPUT: 'waiting',
  FAILED: 'error',
  CANCELLED: 'cancelled',
  COMPLETED: 'done',
};

export function StateBadge({ state, label, text: shown }: { state: string; label?: string; text?: string }) {
  const text = shown ?? LABELS[state] ?? state.toLowerCase();
  return (
    <span className={`badge state-${state.toLowerCase()}`} data-state={state} title={label ?? state}>
      {(state === 'RUNNING' || state === 'IN_PROGRESS' || state === 'STARTING') && (
        <span className="pulse" aria-hidden="true" />
      )}
      {text}
    </span>
  );
}
