// Issue 14's defects, one test each: reproduced first, then fixed (the test name says which).
import { rmSync } from 'node:fs';
import type { Page } from '@playwright/test';
import { expect, freePort, type Kandev, openBoard, send, startKandev, test, transcript } from './kandev';

/** A started task whose first reply is in; its page is open. */
async function openStarted(page: Page, kandev: Kandev, title: string): Promise<{ task: any; sessionId: string }> {
  const { task, session } = await kandev.api('task.create', {
    workflow_id: (await kandev.board()).workflowId,
    title,
    start_agent: true,
  });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText(`echo: ${title}`);
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  return { task, sessionId: session.id };
}

/** How far the transcript's bottom edge is below what is shown (0: at the newest message). */
const hiddenBelow = (page: Page) =>
  transcript(page).evaluate((el) => Math.round(el.scrollHeight - el.scrollTop - el.clientHeight));

/** The last row of the transcript is fully in view. */
async function expectAtNewest(page: Page) {
  await expect.poll(() => hiddenBelow(page)).toBeLessThanOrEqual(2);
  const log = transcript(page);
  const last = await log.locator('.vrow').evaluateAll((rows) => {
    const sorted = rows
      .map((r) => r.getBoundingClientRect())
      .sort((a, b) => b.bottom - a.bottom);
    return sorted[0]?.bottom ?? 0;
  });
  const box = await log.boundingBox();
  expect(last).toBeLessThanOrEqual((box?.y ?? 0) + (box?.height ?? 0) + 1);
}

const lines = (label: string) => Array.from({ length: 6 }, (_, i) => `${label} line ${i + 1}`).join('\n');

test('i14 d1 the chat opens at the newest message, after a reload and after Send next', async ({ page, kandev }) => {
  const { sessionId } = await openStarted(page, kandev, 'Scrolling');
  for (let i = 1; i <= 6; i++) await send(page, lines(`message ${i}`));
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: message 6 line 1', {
    timeout: 20_000,
  });
  await expectAtNewest(page);
  await page.reload();
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: message 6 line 1');
  await expectAtNewest(page);

  // two messages queued behind a long turn, the turn cancelled (auto-run turns off), reload
  await send(page, '#!mock\nsleep 20000');
  await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
  await kandev.api('message.add', { session_id: sessionId, content: lines('queued one'), queue: true });
  await kandev.api('message.add', { session_id: sessionId, content: lines('queued two'), queue: true });
  await page.getByRole('button', { name: 'Cancel turn' }).click();
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  await page.reload();
  await expect(page.getByRole('region', { name: 'Queued messages' }).locator('.queue-item')).toHaveCount(2);
  await expectAtNewest(page);
  await page.getByRole('button', { name: 'Send next' }).click();
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: queued one line 1');
  await expectAtNewest(page);
});

test('i14 d3 Stop on an idle session says that the agent stopped', async ({ page, kandev }) => {
  await openStarted(page, kandev, 'Stop me');
  await page.getByRole('toolbar', { name: 'Session controls' }).getByRole('button', { name: 'Stop' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Agent stopped' })).toBeVisible();
  await expect(transcript(page).locator('[data-kind="status"]').last()).toContainText('agent stopped');
  // the next message resumes it
  await send(page, 'still there?');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: still there?');
});

test('i14 d4 the New task dialog says when the step starts the agent, and an unticked start starts nothing', async ({
  page,
  kandev,
}) => {
  await openBoard(page, kandev);
  await page.getByRole('button', { name: 'New task' }).click();
  const dialog = page.getByRole('dialog', { name: 'New task' });
  const start = dialog.getByLabel('Start the agent now');
  // In Progress (the start step) starts the agent on entry: the box cannot claim otherwise
  await expect(start).toBeChecked();
  await expect(start).toBeDisabled();
  await expect(dialog.getByText('In Progress starts the agent when a task enters it')).toBeVisible();
  await dialog.getByLabel('Step').selectOption({ label: 'Backlog' });
  await expect(start).toBeEnabled();
  await expect(start).not.toBeChecked(); // Backlog does not start the agent: neither does the box
  await dialog.getByLabel('Title').fill('Not yet');
  await dialog.getByRole('button', { name: 'Create task' }).click();
  await expect(dialog).toBeHidden();
  await page.locator('.card', { hasText: 'Not yet' }).click();
  await expect(page.getByRole('button', { name: 'Start agent' })).toBeVisible();
  const { tasks } = await kandev.api('task.list', { workflow_id: (await kandev.board()).workflowId });
  const sessions = await kandev.api('task.session.list', { task_id: tasks.find((t: any) => t.title === 'Not yet').id });
  expect(sessions.sessions).toHaveLength(0);
});

test('i14 d6 the "Queued" hint goes once the queue has drained', async ({ page, kandev }) => {
  await openStarted(page, kandev, 'Hint');
  await send(page, '#!mock\nsleep 1500\nsay slept');
  await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
  await send(page, 'after');
  const hint = page.getByRole('status').filter({ hasText: 'Queued' });
  await expect(hint).toBeVisible();
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: after', { timeout: 20_000 });
  await expect(hint).toHaveCount(0);
});

test('i14 d9 with a search, the column counts say how many match', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  const done = steps.find((s) => s.name === 'Done')!;
  await kandev.createTask('alpha one', { step_id: backlog.id });
  await kandev.createTask('beta two', { step_id: backlog.id });
  await kandev.createTask('gamma', { step_id: done.id });
  await openBoard(page, kandev);
  const count = (name: string) => page.locator(`section.column[data-step-name="${name}"]`).getByTestId('column-count');
  await expect(count('Backlog')).toHaveText('2');
  await page.getByRole('searchbox', { name: 'Search tasks' }).fill('alpha');
  await expect(count('Backlog')).toHaveText('1 of 2');
  await expect(count('Done')).toHaveText('0 of 1');
  await expect(page.locator('section.column[data-step-name="Done"]')).toContainText('No matching tasks');
});

test('i14 d10 a card of a task that never ran shows no session state', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const done = steps.find((s) => s.name === 'Done')!;
  await kandev.createTask('Finished by hand', { step_id: done.id });
  await openBoard(page, kandev);
  const card = page.locator('.card', { hasText: 'Finished by hand' });
  await expect(card).toBeVisible();
  await expect(card).not.toContainText('to do');
  await expect(card.locator('[data-state]')).toHaveCount(0);
});

test('i14 d12 the New task dialog opens on Title; Enter saves an edited queue entry', async ({ page, kandev }) => {
  await openBoard(page, kandev);
  await page.getByRole('button', { name: 'New task' }).click();
  await expect(page.getByRole('dialog', { name: 'New task' }).getByLabel('Title')).toBeFocused();
  await page.keyboard.press('Escape');

  const { sessionId } = await openStarted(page, kandev, 'Edit queue');
  await send(page, '#!mock\nsleep 20000');
  await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
  const queue = page.getByRole('region', { name: 'Queued messages' });
  await queue.getByLabel('Auto-run').uncheck();
  await kandev.api('message.add', { session_id: sessionId, content: 'draft', queue: true });
  await queue.locator('.queue-item', { hasText: 'draft' }).getByRole('button', { name: 'Edit' }).click();
  const box = queue.getByLabel('Edit queued message');
  await expect(box).toBeFocused();
  await box.fill('final');
  await box.press('Enter');
  await expect(queue.locator('.queue-item')).toHaveText([/final/]);
  await page.getByRole('button', { name: 'Cancel turn' }).click();
});

test('i14 d11 the focus stays on a card the workflow moves on by itself', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const task = await kandev.createTask('Moves on', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
  await openBoard(page, kandev);
  const card = page.locator('.card', { hasText: 'Moves on' });
  await card.focus();
  await page.keyboard.press(']');
  // In Progress starts the agent; the finished turn moves the task on to Review
  await expect(page.locator('section.column[data-step-name="Review"] .card', { hasText: 'Moves on' })).toBeVisible({
    timeout: 20_000,
  });
  await expect(card).toBeFocused();
  // The key still acts on the card: back to In Progress, which starts a turn again (whose end
  // moves the card on once more, often before the page could see it in In Progress).
  const turns = async () => {
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const { messages } = await kandev.api('message.list', { session_id: sessions[0].id, limit: 1000 });
    return messages.filter((m: any) => m.kind === 'user').length;
  };
  const before = await turns();
  await page.keyboard.press('[');
  await expect.poll(turns, { timeout: 15_000 }).toBeGreaterThan(before);
});

test('i14 d2 after a server restart the page stops saying the agent works', async ({ page }) => {
  // Without a runner the restart ends the turn (the local runner would keep it going).
  const kandev = await startKandev(`127.0.0.1:${await freePort()}`, ['--runner', 'none']);
  try {
    await openStarted(page, kandev, 'Restarted');
    await send(page, '#!mock\nsay starting\nsleep 15000');
    await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
    const working = page.getByText('The agent is working…');
    await expect(working).toBeVisible();
    await kandev.stop('SIGKILL');
    await expect(page.getByTestId('connection')).toHaveText(/Reconnecting/);
    const box = page.getByRole('textbox', { name: 'Message to the agent' });
    await box.fill('are you there?');
    await box.press('Enter');
    const unreachable = page.getByRole('alert').filter({ hasText: 'cannot be reached' });
    await expect(unreachable).toBeVisible();
    await kandev.start();
    await expect(page.getByTestId('connection')).toHaveText('Live', { timeout: 20_000 });
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT', { timeout: 20_000 });
    await expect(working).toHaveCount(0);
    await expect(page.getByRole('button', { name: 'Cancel turn' })).toBeDisabled();
    await expect(page.locator('.composer button[type="submit"]')).toHaveText('Send');
    await expect(unreachable).toHaveCount(0);
    await expect(box).toHaveValue('are you there?'); // not sent: still there to send
  } finally {
    await kandev.stop('SIGTERM');
    rmSync(kandev.home, { recursive: true, force: true });
  }
});

test('i14 d15 the mock reports a permission answer on its own line, not glued to the next text', async ({ page, kandev }) => {
  await openStarted(page, kandev, 'Lines');
  await send(page, '#!mock\nask_permission Edit README.md\nsay Now streaming');
  const card = transcript(page).locator('[data-kind="permission_request"]');
  await card.getByRole('button', { name: 'Allow once' }).click();
  const agent = transcript(page).locator('[data-kind="agent"]').last();
  await expect(agent).toContainText('Now streaming');
  // As rendered (innerText shows a line break as one): two lines, not "allow_onceNow".
  expect(await agent.evaluate((el) => (el as HTMLElement).innerText)).toMatch(/permission: allow_once\n+Now streaming/);
});

test('i14 d15 a completed plan item strikes through its words, not its check mark', async ({ page, kandev }) => {
  await openStarted(page, kandev, 'Planner');
  await send(page, '#!mock\nplan completed: read the code; in_progress: write the fix\nsay planned');
  const done = transcript(page).locator('[data-kind="plan"] li[data-status="completed"]');
  await expect(done).toContainText('read the code');
  const line = (sel: string) => done.locator(sel).evaluate((el) => getComputedStyle(el).textDecorationLine);
  expect(await line('.check-mark')).toBe('none');
  expect(await done.evaluate((el) => getComputedStyle(el).textDecorationLine)).toBe('none');
  expect(await done.getByText('read the code').evaluate((el) => getComputedStyle(el).textDecorationLine)).toBe(
    'line-through',
  );
});

test('i14 d14 the session shows the model its profile asked for, and the agent uses it', async ({ page, kandev }) => {
  const { profile } = await kandev.api('agent.profile.create', { name: 'Smart mock', kind: 'mock', model: 'mock-smart' });
  const { task, session } = await kandev.api('task.create', {
    workflow_id: (await kandev.board()).workflowId,
    title: 'Which model',
    agent_profile_id: profile.id,
    start_agent: true,
  });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Which model');
  await expect(page.getByTestId('session-model')).toHaveText('model: mock-smart');
  await expect(page.getByTestId('model-mismatch')).toHaveCount(0);
  const { session: s } = await kandev.api('session.get', { id: session.id });
  expect(s.config_options.model).toBe('mock-smart');
});

test('i14 d15 a missing agent command gets its own hint, not the generic one', async ({ page, kandev }) => {
  const { profile } = await kandev.api('agent.profile.create', {
    name: 'Missing agent',
    kind: 'custom',
    command: '/nonexistent/kandev-agent',
  });
  const { task } = await kandev.api('task.create', {
    workflow_id: (await kandev.board()).workflowId,
    title: 'No agent',
    agent_profile_id: profile.id,
    start_agent: true,
  });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  const banner = page.getByTestId('last-error');
  await expect(banner).toContainText('Settings → Agent profiles', { timeout: 20_000 });
  await expect(banner).not.toContainText('Send a message to try again');
});
