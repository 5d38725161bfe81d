// Issue 14's scope: needs-you, step controls, jump to latest, archive with Undo, the archived
// view, keyboard shortcuts, the first-run hint and the Changes empty state.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { expect, type Kandev, openBoard, removeRepo, send, test, transcript } from './kandev';

async function startedTask(kandev: Kandev, title: string): Promise<{ task: any; sessionId: string }> {
  const { task, session } = await kandev.api('task.create', {
    workflow_id: (await kandev.board()).workflowId,
    title,
    start_agent: true,
  });
  return { task, sessionId: session.id };
}

async function openTaskPage(page: Page, kandev: Kandev, taskId: string, firstReply: string) {
  await page.goto(`${kandev.url}/tasks/${taskId}`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText(firstReply);
}

const icon = (page: Page) => page.locator('link[rel="icon"]');

test('i14 d5 a pending permission marks the task as needing you: card, filter, tab title and icon', async ({
  page,
  kandev,
}) => {
  const { steps } = await kandev.board();
  await kandev.createTask('Quiet one', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
  const { task, sessionId } = await startedTask(kandev, 'Asks first');
  await openTaskPage(page, kandev, task.id, 'echo: Asks first');
  await send(page, '#!mock\nask_permission Edit README.md\nsay finished');
  await expect(page.getByTestId('needs-you')).toContainText('a permission to answer');
  await expect(page).toHaveTitle('Needs you · Asks first — Kandev');
  await expect(icon(page)).toHaveAttribute('data-alert', 'true');

  await page.getByRole('button', { name: 'Back to the board' }).click();
  const card = page.locator('.card', { hasText: 'Asks first' });
  await expect(card.getByTestId('needs-you')).toHaveText('needs you');
  await expect(page).toHaveTitle('(1) Kandev');
  await page.getByRole('button', { name: /Needs me/ }).click();
  await expect(page.locator('.card')).toHaveText([/Asks first/]);
  await page.getByRole('button', { name: /Needs me/ }).click();
  await expect(page.locator('.card', { hasText: 'Quiet one' })).toBeVisible();

  // answered: nobody is needed any more
  const { messages } = await kandev.api('message.list', { session_id: sessionId, limit: 100 });
  const request = messages.find((m: any) => m.kind === 'permission_request');
  await kandev.api('permission.respond', {
    session_id: sessionId,
    request_id: request.metadata.request_id,
    option_id: request.metadata.options[0].option_id,
  });
  await expect(card.getByTestId('needs-you')).toHaveCount(0);
  await expect(page).toHaveTitle('Kandev');
  await expect(icon(page)).toHaveAttribute('data-alert', 'false');
});

test('i14 a failed session needs you', async ({ page, kandev }) => {
  const { task } = await startedTask(kandev, 'Breaks');
  await openTaskPage(page, kandev, task.id, 'echo: Breaks');
  await send(page, '#!mock\ncrash');
  await expect(page.getByTestId('needs-you')).toContainText('failed');
  await expect(page).toHaveTitle('Needs you · Breaks — Kandev');
});

test('i14 step controls move the task from its page', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const task = await kandev.createTask('Step by step', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByTestId('task-step')).toHaveText('Backlog');
  await page.getByRole('button', { name: 'Backlog → In Progress' }).click();
  await expect(page.getByTestId('task-step')).toHaveText(/In Progress|Review/);
  await page.getByLabel('Move to step').selectOption({ label: 'Done' });
  await expect(page.getByTestId('task-step')).toHaveText('Done');
  await expect(page.getByTestId('next-step')).toHaveCount(0); // the last step has no next
});

test('i14 jump to latest: the transcript follows new output only at the bottom', async ({ page, kandev }) => {
  const { task, sessionId } = await startedTask(kandev, 'Long talk');
  await openTaskPage(page, kandev, task.id, 'echo: Long talk');
  for (let i = 1; i <= 8; i++) {
    await kandev.api('message.add', { session_id: sessionId, content: `message ${i}\n\n${'words '.repeat(60)}` });
  }
  const log = transcript(page);
  await expect(log.locator('[data-kind="agent"]').last()).toContainText('echo: message 8', { timeout: 20_000 });
  const jump = page.getByRole('button', { name: 'Jump to latest' });
  await expect(jump).toHaveCount(0);
  await log.evaluate((el) => el.scrollTo({ top: 0 }));
  await expect(jump).toBeVisible();
  // new output while scrolled up leaves the view where it is
  await kandev.api('message.add', { session_id: sessionId, content: 'one more' });
  await expect.poll(() => kandev.api('message.list', { session_id: sessionId, limit: 200 }).then((r) => r.messages.length)).toBeGreaterThanOrEqual(20);
  expect(await log.evaluate((el) => el.scrollTop)).toBeLessThan(200);
  await jump.click();
  await expect(jump).toHaveCount(0);
  await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: one more');
  await expect.poll(() => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight)).toBeLessThan(3);
});

test('i14 d8 archive shows a toast with Undo, and the archived view restores', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  await kandev.createTask('Keep me', { step_id: backlog.id });
  await kandev.createTask('Old news', { step_id: backlog.id });
  await openBoard(page, kandev);
  const card = page.locator('.card', { hasText: 'Keep me' });
  await card.getByRole('button', { name: 'Archive Keep me' }).click();
  await expect(card).toHaveCount(0);
  const toastEl = page.getByTestId('toast').filter({ hasText: 'Archived “Keep me”' });
  await expect(toastEl).toBeVisible();
  await toastEl.getByRole('button', { name: 'Undo' }).click();
  await expect(card).toBeVisible();

  await page.locator('.card', { hasText: 'Old news' }).getByRole('button', { name: 'Archive Old news' }).click();
  await expect(page.locator('.card', { hasText: 'Old news' })).toHaveCount(0);
  await page.getByRole('button', { name: 'Archived', exact: true }).click();
  const archived = page.getByRole('region', { name: 'Archived tasks' });
  await expect(archived.locator('li')).toHaveText([/Old news/]);
  await archived.getByRole('button', { name: 'Restore' }).click();
  await expect(page.locator('.card', { hasText: 'Old news' })).toBeVisible();
  await expect(archived).toContainText('No archived tasks');
});

test('i14 keyboard: n opens New task on its Title, / searches, Esc goes back', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  await kandev.createTask('Find me', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
  await openBoard(page, kandev);
  await page.keyboard.press('n');
  const dialog = page.getByRole('dialog', { name: 'New task' });
  await expect(dialog.getByLabel('Title')).toBeFocused();
  await page.keyboard.press('Escape');
  await expect(dialog).toBeHidden();
  await page.keyboard.press('/');
  const search = page.getByRole('searchbox', { name: 'Search tasks' });
  await expect(search).toBeFocused();
  await page.keyboard.type('find');
  await expect(search).toHaveValue('find'); // the slash is not typed into it
  await page.locator('.card', { hasText: 'Find me' }).click();
  await expect(page.getByRole('heading', { name: 'Find me' })).toBeVisible();
  await page.keyboard.press('Escape');
  await expect(page.locator('.columns[data-loaded="true"]')).toBeVisible();
});

test('i14 first-run hint on an empty board points to Settings → Repositories', async ({ page, kandev }) => {
  await openBoard(page, kandev);
  const hint = page.getByTestId('first-run');
  await expect(hint).toBeVisible();
  await hint.getByRole('link', { name: 'Settings → Repositories' }).click();
  await expect(page).toHaveURL(/\/settings\/repositories$/);
});

test('i14 d7 Changes without a repository is a neutral empty state that attaches one', async ({ page, kandev }) => {
  const repo = mkdtempSync(join(tmpdir(), 'kandev-e2e-repo-'));
  try {
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=Kandev Test', '-c', 'user.email=test@kandev.invalid', ...args], { cwd: repo });
    git('init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'README.md'), '# demo\n');
    git('add', '.');
    git('commit', '-q', '-m', 'initial');
    const { workspaceId, steps } = await kandev.board();
    await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('No repo yet', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
    await page.goto(`${kandev.url}/tasks/${task.id}?tab=changes`);
    const empty = page.getByTestId('changes-empty');
    await expect(empty).toContainText('No repository');
    await expect(page.getByRole('alert')).toHaveCount(0);
    await expect(page.getByLabel('Commit message')).toHaveCount(0);
    await empty.getByRole('button', { name: 'Attach repository' }).click();
    await expect(empty).toHaveCount(0);
    await expect(page.getByLabel('Commit message')).toBeVisible();
  } finally {
    removeRepo(repo);
  }
});
