import { describe, expect, it } from 'vitest';
import type { IntakeSourceDto, RepositoryDto, StepDto, WorkflowDto } from '../api/types';
import {
  defaultStepId,
  hookUrl,
  localTime,
  missedName,
  originText,
  pollNote,
  schemeName,
  sourceWhat,
  stepChoices,
  startsAgent,
  stepPlace,
  webLink,
} from './intake';

const step = (id: string, name: string, position: number, start = false): StepDto =>
  ({ id, name, position, is_start_step: start }) as unknown as StepDto;
const workflow = (id: string, name: string, steps: StepDto[]): WorkflowDto =>
  ({ id, name, steps }) as unknown as WorkflowDto;
const repo = (id: string, name: string): RepositoryDto => ({ id, name }) as unknown as RepositoryDto;
const source = (fields: Partial<IntakeSourceDto>): IntakeSourceDto =>
  ({ kind: 'issues', repository_id: 'r1', label: '', ...fields }) as IntakeSourceDto;

const board = workflow('w1', 'Board', [step('done', 'Done', 2), step('todo', 'Todo', 1, true), step('backlog', 'Backlog', 0)]);
const triage = workflow('w2', 'Triage', [step('new', 'New', 0)]);

describe('stepChoices', () => {
  it('names every step of every workflow "Workflow › Step", in board order', () => {
    expect(stepChoices([board, triage]).map((c) => [c.stepId, c.workflowId, c.label])).toEqual([
      ['backlog', 'w1', 'Board › Backlog'],
      ['todo', 'w1', 'Board › Todo'],
      ['done', 'w1', 'Board › Done'],
      ['new', 'w2', 'Triage › New'],
    ]);
  });
});

describe('defaultStepId', () => {
  it('is the first workflow’s start step', () => {
    expect(defaultStepId([board, triage])).toBe('todo');
  });
  it('is the first step when none is the start, and empty without workflows', () => {
    expect(defaultStepId([triage, board])).toBe('new');
    expect(defaultStepId([workflow('w3', 'Plain', [step('b', 'B', 1), step('a', 'A', 0)])])).toBe('a');
    expect(defaultStepId([])).toBe('');
  });
});

describe('stepPlace', () => {
  it('names the workflow and the step, or says which is gone', () => {
    expect(stepPlace([board], 'w1', 'todo')).toBe('Board › Todo');
    expect(stepPlace([board], 'w1', 'gone')).toBe('Board › a deleted step');
    expect(stepPlace([board], 'w9', 'todo')).toBe('a deleted workflow');
  });
});

describe('sourceWhat', () => {
  const repos = [repo('r1', 'widget')];
  it('says whose issues, with the label when there is one', () => {
    expect(sourceWhat(source({ label: 'bug' }), repos)).toBe('Issues of widget labeled bug');
    expect(sourceWhat(source({}), repos)).toBe('Issues of widget');
    expect(sourceWhat(source({ repository_id: 'r9' }), repos)).toBe('Issues of a removed repository');
  });
  it('says a webhook source takes only what its webhook delivers', () => {
    expect(sourceWhat(source({ kind: 'webhook', repository_id: null }), repos)).toBe('Webhook only');
  });
});

describe('webhooks', () => {
  it('names the schemes', () => {
    expect([schemeName('github'), schemeName('gitlab'), schemeName('hmac'), schemeName('other')]).toEqual([
      'GitHub',
      'GitLab',
      'Generic HMAC',
      'other',
    ]);
  });
  it('builds the URL on the page’s origin', () => {
    expect(hookUrl('http://127.0.0.1:8080', 'abc')).toBe('http://127.0.0.1:8080/hooks/abc');
    expect(hookUrl('https://kandev.example/', 'a b')).toBe('https://kandev.example/hooks/a%20b');
  });
});

describe('words', () => {
  it('counts the new tasks of a poll', () => {
    expect([pollNote(0), pollNote(1), pollNote(3)]).toEqual(['No new tasks', '1 new task', '3 new tasks']);
  });
  it('names the missed-runs policies', () => {
    expect([missedName('run_once'), missedName('skip')]).toEqual(['Run once at startup', 'Skip']);
  });
  it('shows a time in the given zone, and a value it cannot read as it is', () => {
    expect(localTime('2025-06-02T07:00:00Z', 'Europe/Berlin', 'en-GB')).toBe('2 Jun 2025, 09:00');
    expect(localTime('soon', 'UTC', 'en-GB')).toBe('soon');
  });
});

describe('webLink', () => {
  it('links web pages only', () => {
    expect(webLink('https://github.com/acme/widget/issues/12')).toBe('https://github.com/acme/widget/issues/12');
    expect(webLink('http://tracker.test/T-1')).toBe('http://tracker.test/T-1');
    expect(webLink('javascript:alert(1)')).toBeNull();
    expect(webLink('tracker.test/T-1')).toBeNull();
    expect(webLink('')).toBeNull();
  });
});

describe('originText', () => {
  it('names a webhook delivery without its keys', () => {
    expect(originText('hook:src-1:del-9')).toBe('Made by a webhook delivery');
  });
  it('names a schedule run by its time', () => {
    const ms = Date.UTC(2025, 5, 2, 9, 0);
    expect(originText(`schedule:sch-1@${ms}`, 'UTC', 'en-US')).toBe('Made by a schedule, run of Jun 2, 2025, 9:00 AM');
  });
  it('names a forge issue', () => {
    expect(originText('github:owner/repo#12')).toBe('From issue owner/repo#12');
    expect(originText('gitlab:group/project#3')).toBe('From issue group/project#3');
  });
  it('keeps any other key as it is', () => {
    expect(originText('TRK-7')).toBe('From TRK-7');
    expect(originText('schedule:odd')).toBe('From schedule:odd');
  });
});

describe('startsAgent', () => {
  it('is a step whose on-enter actions start the agent', () => {
    const starting = { events: { on_enter: [{ type: 'auto_start_agent' }] } } as unknown as StepDto;
    const idle = { events: { on_enter: [{ type: 'push' }] } } as unknown as StepDto;
    expect(startsAgent(starting)).toBe(true);
    expect(startsAgent(idle)).toBe(false);
    const w = workflow('w', 'Board', [{ ...starting, id: 's', name: 'Todo', position: 0 } as StepDto]);
    expect(stepChoices([w])[0]?.label).toBe('Board › Todo (starts the agent)');
  });
});
