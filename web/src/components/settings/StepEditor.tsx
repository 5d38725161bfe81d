// One workflow step's editor: name, color, agent profile, prompt, flags and the actions run on
// its events.
import { toast } from '../../lib/toast';
import { useState } from 'react';
import { call } from '../../api/client';
import type { ActionDto, EventsDto, MergeStrategyDto, StepDto } from '../../api/types';
import { useFormError } from './useFormError';
import { ProfileSelect } from '../ProfileSelect';

/** The actions each event of a step may run. */
const SHIP: ActionDto['type'][] = ['rebase', 'push', 'create_pull_request', 'merge'];
const MOVES: ActionDto['type'][] = ['move_to_next', 'move_to_previous', 'move_to_step'];
const ACTIONS: Record<keyof EventsDto, ActionDto['type'][]> = {
  on_enter: ['reset_agent_context', 'enable_plan_mode', 'set_session_mode', 'auto_start_agent', 'start_attempts', ...SHIP],
  on_turn_start: MOVES,
  on_turn_complete: [...MOVES, 'disable_plan_mode', ...SHIP],
  on_exit: ['disable_plan_mode'],
  // The issue a task came from (intake, issue 47): a move stays the first, the default choice.
  on_pr_merged: [...MOVES, 'comment_issue', 'close_issue'],
  on_pr_closed: [...MOVES, 'comment_issue'],
  on_pr_checks_failed: ['send_feedback', ...MOVES],
  on_pr_checks_passed: ['auto_merge', ...MOVES],
  on_pr_review: ['send_feedback', ...MOVES],
};

/** What each trigger and action is called in the editor. */
const TRIGGER_LABEL: Record<keyof EventsDto, string> = {
  on_enter: 'On enter',
  on_turn_start: 'On turn start',
  on_turn_complete: 'On turn complete',
  on_exit: 'On exit',
  on_pr_merged: 'On PR merged',
  on_pr_closed: 'On PR closed',
  on_pr_checks_failed: 'On PR checks failed',
  on_pr_checks_passed: 'On PR checks passed',
  on_pr_review: 'On PR review',
};
const ACTION_LABEL: Record<ActionDto['type'], string> = {
  reset_agent_context: 'Reset the agent’s context',
  enable_plan_mode: 'Turn plan mode on',
  disable_plan_mode: 'Turn plan mode off',
  set_session_mode: 'Set the session mode',
  auto_start_agent: 'Start the agent',
  move_to_next: 'Move to the next step',
  move_to_previous: 'Move to the previous step',
  move_to_step: 'Move to a step',
  push: 'Push',
  create_pull_request: 'Create a pull request',
  merge: 'Merge',
  rebase: 'Rebase',
  send_feedback: 'Send the feedback to the agent',
  auto_merge: 'Merge the pull request',
  comment_issue: 'Comment on the issue',
  close_issue: 'Close the issue',
  start_attempts: 'Start attempts',
};

export function StepEditor(props: { step: StepDto; steps: StepDto[]; first: boolean; last: boolean; onMove: (by: number) => void }) {
  const [step, setStep] = useState(props.step);
  const { wrap, view } = useFormError();
  const set = <K extends keyof StepDto>(k: K, v: StepDto[K]) => setStep((s) => ({ ...s, [k]: v }));
  const setEvents = (trigger: keyof EventsDto, list: ActionDto[]) =>
    setStep((s) => ({ ...s, events: { ...s.events, [trigger]: list } }));
  /** Replaces the action at `i` of `trigger`. */
  const setAction = (trigger: keyof EventsDto, i: number, action: ActionDto) =>
    setEvents(trigger, step.events[trigger].map((a, j) => (j === i ? action : a)));
  return (
    <details className="step-editor">
      <summary>
        <span className="dot" style={{ background: step.color || 'var(--muted)' }} aria-hidden="true" />
        {props.step.name}
        {props.step.is_start_step && <span className="badge">start</span>}
      </summary>
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault();
          void wrap(async () => {
            await call('workflow.step.update', {
              id: step.id,
              name: step.name,
              color: step.color,
              prompt: step.prompt,
              is_start_step: step.is_start_step,
              allow_manual_move: step.allow_manual_move,
              agent_profile_id: step.agent_profile_id,
              cancel_triggers_turn_complete: step.cancel_triggers_turn_complete,
              events: step.events,
            });
            toast(`Saved “${step.name}”`);
          });
        }}
      >
        <div className="row">
          <label>
            Name
            <input value={step.name} onChange={(e) => set('name', e.target.value)} />
          </label>
          <label>
            Color
            <input type="color" value={step.color || '#888888'} onChange={(e) => set('color', e.target.value)} />
          </label>
          <ProfileSelect value={step.agent_profile_id ?? ''} none="The task's" onChange={(id) => set('agent_profile_id', id || null)} />
        </div>
        <label>
          Prompt{' '}
          <span className="hint">
            {'{{task_prompt}}'} is replaced by the task's title and description, {'{{prompt:name}}'} by the saved prompt
            name (Settings › Prompts)
          </span>
          <textarea rows={3} aria-label="Prompt" value={step.prompt} onChange={(e) => set('prompt', e.target.value)} />
        </label>
        <div className="row checks">
          <label className="check">
            <input type="checkbox" checked={step.is_start_step} onChange={(e) => set('is_start_step', e.target.checked)} />
            Start step
          </label>
          <label className="check">
            <input type="checkbox" checked={step.allow_manual_move} onChange={(e) => set('allow_manual_move', e.target.checked)} />
            Manual moves allowed
          </label>
          <label className="check">
            <input
              type="checkbox"
              checked={step.cancel_triggers_turn_complete}
              onChange={(e) => set('cancel_triggers_turn_complete', e.target.checked)}
            />
            A cancel counts as turn complete
          </label>
        </div>
        {(Object.keys(ACTIONS) as (keyof EventsDto)[]).map((trigger) => (
          <fieldset key={trigger} className="events">
            <legend>{TRIGGER_LABEL[trigger]}</legend>
            {step.events[trigger].map((a, i) => (
              <div key={i} className="action-row">
                <select
                  aria-label="Action"
                  value={a.type}
                  onChange={(e) => setAction(trigger, i, makeAction(e.target.value as ActionDto['type'], props.steps))}
                >
                  {ACTIONS[trigger].map((t) => (
                    <option key={t} value={t}>
                      {ACTION_LABEL[t]}
                    </option>
                  ))}
                </select>
                {a.type === 'move_to_step' && (
                  <select
                    aria-label="Target step"
                    value={a.step_id}
                    onChange={(e) => setAction(trigger, i, { type: 'move_to_step', step_id: e.target.value })}
                  >
                    {props.steps.map((s) => (
                      <option key={s.id} value={s.id}>
                        {s.name}
                      </option>
                    ))}
                  </select>
                )}
                {a.type === 'send_feedback' && (
                  <>
                    <label className="inline">
                      at most{' '}
                      <input
                        type="number"
                        min={1}
                        max={20}
                        aria-label="Feedback rounds"
                        value={a.max_rounds}
                        onChange={(e) => setAction(trigger, i, { ...a, max_rounds: Number(e.target.value) })}
                      />{' '}
                      rounds
                    </label>
                    <label className="check">
                      <input
                        type="checkbox"
                        checked={a.include_bots}
                        onChange={(e) => setAction(trigger, i, { ...a, include_bots: e.target.checked })}
                      />
                      bots’ comments too
                    </label>
                  </>
                )}
                {(a.type === 'merge' || a.type === 'auto_merge') && (
                  <select
                    aria-label="Merge strategy"
                    value={a.strategy}
                    onChange={(e) => setAction(trigger, i, { type: a.type, strategy: e.target.value as MergeStrategyDto })}
                  >
                    <option value="merge">merge commit</option>
                    <option value="squash">squash</option>
                    {/* On the forge, fast-forward is its rebase merge. */}
                    <option value="fast_forward">{a.type === 'merge' ? 'fast-forward' : 'rebase'}</option>
                  </select>
                )}
                {a.type === 'start_attempts' && (
                  <label className="inline" title="Each attempt works on a branch of its own; pick one on the task's Attempts tab">
                    <input
                      type="number"
                      min={1}
                      max={6}
                      aria-label="Attempts"
                      value={a.count}
                      onChange={(e) => setAction(trigger, i, { type: 'start_attempts', count: Number(e.target.value) })}
                    />{' '}
                    agents, each on its own branch
                  </label>
                )}
                {a.type === 'set_session_mode' && (
                  <input
                    aria-label="Mode id"
                    value={a.mode_id}
                    onChange={(e) => setAction(trigger, i, { type: 'set_session_mode', mode_id: e.target.value })}
                  />
                )}
                <button
                  type="button"
                  className="icon"
                  aria-label="Remove action"
                  onClick={() => setEvents(trigger, step.events[trigger].filter((_, j) => j !== i))}
                >
                  ×
                </button>
              </div>
            ))}
            <button
              type="button"
              className="link"
              onClick={() => setEvents(trigger, [...step.events[trigger], makeAction(ACTIONS[trigger][0]!, props.steps)])}
            >
              + action
            </button>
          </fieldset>
        ))}
        {view}
        <div className="actions">
          <button type="button" disabled={props.first} onClick={() => props.onMove(-1)}>
            Move left
          </button>
          <button type="button" disabled={props.last} onClick={() => props.onMove(1)}>
            Move right
          </button>
          <button
            type="button"
            className="danger-outline"
            onClick={() => void wrap(() => call('workflow.step.delete', { id: step.id }))}
          >
            Delete step
          </button>
          <button className="primary" type="submit">
            Save step
          </button>
        </div>
      </form>
    </details>
  );
}

function makeAction(type: ActionDto['type'], steps: StepDto[]): ActionDto {
  if (type === 'move_to_step') return { type, step_id: steps[0]?.id ?? '' };
  if (type === 'set_session_mode') return { type, mode_id: '' };
  if (type === 'merge' || type === 'auto_merge') return { type, strategy: 'merge' };
  if (type === 'send_feedback') return { type, max_rounds: 3, include_bots: false };
  if (type === 'start_attempts') return { type, count: 2 };
  return { type } as ActionDto;
}
