// Intake (issue 47) in words, for Settings › Intake (no React): where a source's or a
// schedule's tasks go, what a source takes in, its webhook, what a poll found, times.
import type { IntakeSourceDto, RepositoryDto, StepDto, WorkflowDto } from '../api/types';

/** One choice of a step picker: a step of some workflow, named "Workflow › Step". */
export interface StepChoice {
  stepId: string;
  workflowId: string;
  label: string;
}

/** Whether a task arriving in `step` has its agent started (the step's on-enter actions). */
export function startsAgent(step: StepDto): boolean {
  return step.events?.on_enter?.some((a) => a.type === 'auto_start_agent') ?? false;
}

/** Every step of every workflow, workflow by workflow, each in its board order; a step that
 * starts the agent of each task arriving says so. */
export function stepChoices(workflows: WorkflowDto[]): StepChoice[] {
  return workflows.flatMap((w) =>
    [...w.steps]
      .sort((a, b) => a.position - b.position)
      .map((s) => ({
        stepId: s.id,
        workflowId: w.id,
        label: `${w.name} › ${s.name}${startsAgent(s) ? ' (starts the agent)' : ''}`,
      })),
  );
}

/** The step new tasks go to unless chosen otherwise: the first workflow's start step (its
 * first step when none is marked), as the server defaults. Empty when there is no workflow. */
export function defaultStepId(workflows: WorkflowDto[]): string {
  const first = workflows[0];
  if (!first) return '';
  const start = first.steps.find((s) => s.is_start_step);
  return (start ?? [...first.steps].sort((a, b) => a.position - b.position)[0])?.id ?? '';
}

/** "Workflow › Step" for a step, or what is known of it when it is gone. */
export function stepPlace(workflows: WorkflowDto[], workflowId: string, stepId: string): string {
  const workflow = workflows.find((w) => w.id === workflowId);
  if (!workflow) return 'a deleted workflow';
  const step = workflow.steps.find((s) => s.id === stepId);
  return step ? `${workflow.name} › ${step.name}` : `${workflow.name} › a deleted step`;
}

/** What a source takes in: "Issues of widget labeled bug", "Issues of widget", "Webhook only". */
export function sourceWhat(source: IntakeSourceDto, repositories: RepositoryDto[]): string {
  if (source.kind !== 'issues') return 'Webhook only';
  const repo = repositories.find((r) => r.id === source.repository_id)?.name ?? 'a removed repository';
  return source.label ? `Issues of ${repo} labeled ${source.label}` : `Issues of ${repo}`;
}

/** The webhook signatures a source may check, as the form offers them. */
export const HOOK_SCHEMES = [
  ['github', 'GitHub'],
  ['gitlab', 'GitLab'],
  ['hmac', 'Generic HMAC'],
] as const;

/** A webhook scheme's name ("GitHub"); the wire's word for one this page does not know. */
export function schemeName(scheme: string): string {
  return HOOK_SCHEMES.find(([value]) => value === scheme)?.[1] ?? scheme;
}

/** Where a source's webhook receives deliveries, on the server the page came from. */
export function hookUrl(origin: string, sourceId: string): string {
  return `${origin.replace(/\/+$/, '')}/hooks/${encodeURIComponent(sourceId)}`;
}

/** What a poll found, for its toast. */
export function pollNote(created: number): string {
  if (created === 0) return 'No new tasks';
  return created === 1 ? '1 new task' : `${created} new tasks`;
}

/** What a schedule does with occurrences missed while the server was down. */
export const MISSED = [
  ['run_once', 'Run once at startup'],
  ['skip', 'Skip'],
] as const;

export function missedName(missed: string): string {
  return MISSED.find(([value]) => value === missed)?.[1] ?? missed;
}

/** A time in the browser's zone (or `timeZone`), with the date: "Jun 2, 2025, 9:00 AM". */
export function localTime(iso: string, timeZone?: string, locale?: string): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  return new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short', timeZone }).format(at);
}

/** The browser's time zone (`Europe/Berlin`), the default of a new schedule's. */
export function browserTimeZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch {
    return 'UTC';
  }
}

/** `url` when it is a web page (http or https) to link to; anything else (a `javascript:` a
 * webhook's sender wrote, a typo) is not linked. */
export function webLink(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : null;
  } catch {
    return null;
  }
}

/** Where intake found a task, in words, from its key: "From issue owner/repo#12" (a forge's
 * issue), "Made by a webhook delivery" (a delivery without its own id), "Made by a schedule,
 * run of Jun 2, 2025, 9:00 AM" (a schedule's run, in the browser's time), else "From <key>". */
export function originText(externalId: string, timeZone?: string, locale?: string): string {
  if (/^hook:[^:]*:/.test(externalId)) return 'Made by a webhook delivery';
  const run = /^schedule:.*@(\d+)$/.exec(externalId);
  if (run) {
    const at = new Date(Number(run[1]));
    if (!Number.isNaN(at.getTime())) return `Made by a schedule, run of ${localTime(at.toISOString(), timeZone, locale)}`;
  }
  const issue = /^(?:github|gitlab):(.+)$/.exec(externalId);
  if (issue) return `From issue ${issue[1]}`;
  return `From ${externalId}`;
}
