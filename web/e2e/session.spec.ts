// Task page: queue while the agent works, permissions, cancel, typed rendering, a second tab on
// the same session, session tabs and controls.
import type { Page } from '@playwright/test';
import { expect, type Kandev, send, test, transcript } from './kandev';

/**
 * Creates a started task, opens its page, waits for the agent's first reply, then sends
 * `script` (if any) from the composer, so the page watches the whole scripted turn.
 */
async function openTask(page: Page, kandev: Kandev, title: string, script?: string): Promise<any> {
  const task = await kandev.createTask(title, { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText(`echo: ${title}`);
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  if (script) await send(page, script);
  return task;
}

const state = (page: Page) => page.getByTestId('session-state');

test('a message sent while the agent works is queued and runs after', async ({ page, kandev }) => {
  await openTask(page, kandev, 'Queue', '#!mock\nsleep 1500\nsay done');
  await expect(state(page)).toHaveText('RUNNING');
  await send(page, 'after the sleep');
  const queue = page.getByRole('region', { name: 'Queued messages' });
  await expect(queue.locator('.queue-item')).toHaveText([/after the sleep/]);
  await expect(page.getByRole('status').filter({ hasText: 'Queued' })).toBeVisible();
  const log = transcript(page);
  await expect(log.locator('[data-kind="agent"]').nth(1)).toHaveText('done');
  await expect(log.locator('[data-kind="agent"]').nth(2)).toHaveText('echo: after the sleep');
  await expect(queue.locator('.queue-item')).toHaveCount(0);
  await expect(log.locator('[data-kind="user"]')).toHaveCount(3);
});

test('the queue can be edited, reordered and emptied while the agent works', async ({ page, kandev }) => {
  await openTask(page, kandev, 'Queue edit', '#!mock\nsleep 4000\nsay done');
  await expect(state(page)).toHaveText('RUNNING');
  // auto-run off: queued messages wait for us
  const queue = page.getByRole('region', { name: 'Queued messages' });
  await queue.getByLabel('Auto-run').uncheck();
  await expect(queue.getByLabel('Auto-run')).not.toBeChecked();
  await send(page, 'first');
  await send(page, 'second');
  await send(page, 'third');
  await expect(queue.locator('.queue-item')).toHaveText([/first/, /second/, /third/]);
  await queue.locator('.queue-item', { hasText: 'third' }).getByRole('button', { name: 'Move up' }).click();
  await expect(queue.locator('.queue-item')).toHaveText([/first/, /third/, /second/]);
  await queue.locator('.queue-item', { hasText: 'first' }).getByRole('button', { name: 'Remove from queue' }).click();
  await expect(queue.locator('.queue-item')).toHaveText([/third/, /second/]);
  await queue.locator('.queue-item', { hasText: 'second' }).getByRole('button', { name: 'Edit' }).click();
  await queue.getByLabel('Edit queued message').fill('second, edited');
  await queue.getByRole('button', { name: 'Save' }).click();
  await expect(queue.locator('.queue-item')).toHaveText([/third/, /second, edited/]);
  // the turn ends; nothing runs by itself with auto-run off
  await expect(state(page)).toHaveText('WAITING_FOR_INPUT', { timeout: 20_000 });
  await expect(queue.locator('.queue-item')).toHaveCount(2);
  await queue.getByRole('button', { name: 'Send next' }).click();
  await expect(transcript(page).locator('[data-kind="agent"]').nth(2)).toHaveText('echo: third');
});

test('a permission request is answered from its card', async ({ page, kandev }) => {
  await openTask(page, kandev, 'Permission', '#!mock\nask_permission Edit README.md\nsay finished');
  const card = transcript(page).locator('[data-kind="permission_request"]');
  await expect(card).toHaveAttribute('data-status', 'pending');
  await expect(card).toContainText('Edit README.md');
  await card.getByRole('button', { name: 'Allow once' }).click();
  await expect(card).toHaveAttribute('data-status', 'approved');
  await expect(card).toContainText('Allow once');
  const agent = transcript(page).locator('[data-kind="agent"]').last();
  await expect(agent).toHaveText(/permission: allow_once\s*finished/);
});

test('cancel stops a sleeping turn', async ({ page, kandev }) => {
  await openTask(page, kandev, 'Cancel', '#!mock\nsleep 30000\nsay never');
  await expect(state(page)).toHaveText('RUNNING');
  await page.getByRole('button', { name: 'Cancel turn' }).click();
  await expect(state(page)).toHaveText('WAITING_FOR_INPUT');
  await expect(transcript(page).locator('[data-kind="status"]')).toContainText(['turn cancelled']);
  await expect(transcript(page).locator('[data-kind="agent"]').filter({ hasText: 'never' })).toHaveCount(0);
  // and the session still works
  await send(page, 'still there?');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: still there?');
});

test('tool calls, diffs, plans, thoughts and usage have their own rendering', async ({ page, kandev }) => {
  await openTask(
    page,
    kandev,
    'Rendering',
    [
      '#!mock',
      'think Let me look around',
      'plan completed:Read the code; in_progress:Write the fix; pending:Run tests',
      'tool edit Edit src/lib.rs',
      'tool_done',
      'tool execute cargo test',
      'tool_done failed',
      'usage 1200 200000',
      'say Here is `code` and a [link](https://example.invalid/x)',
      'say <img src=x onerror=alert(1)>',
    ].join('\n'),
  );
  const log = transcript(page);
  const thought = log.locator('[data-kind="thought"]');
  await expect(thought).toBeVisible();
  await expect(thought.getByText('Let me look around')).toBeHidden(); // collapsed
  await thought.getByText('Thinking').click();
  await expect(thought.getByText('Let me look around')).toBeVisible();
  const plan = log.locator('[data-kind="plan"] li');
  await expect(plan).toHaveCount(3);
  await expect(plan.nth(0)).toHaveAttribute('data-status', 'completed');
  await expect(plan.nth(1)).toHaveAttribute('data-status', 'in_progress');
  const tools = log.locator('[data-kind="tool_call"]');
  await expect(tools.nth(0)).toHaveAttribute('data-status', 'completed');
  await expect(tools.nth(0)).toContainText('edit');
  await expect(tools.nth(1)).toHaveAttribute('data-status', 'failed');
  await expect(log.locator('[data-kind="usage"]')).toContainText('1,200 / 200,000');
  const agent = log.locator('[data-kind="agent"]').last();
  await expect(agent.locator('code')).toHaveText('code');
  await expect(agent.locator('a')).toHaveAttribute('rel', /noopener/);
  // raw HTML from the agent is shown as text, never run
  await expect(agent).toContainText('<img src=x onerror=alert(1)>');
  await expect(agent.locator('img')).toHaveCount(0);
});

test('a second tab on the same task sees the conversation live', async ({ page, context, kandev }) => {
  const task = await openTask(page, kandev, 'Two tabs');
  const other = await context.newPage();
  await other.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(other.getByTestId('connection')).toHaveText('Live');
  await page.bringToFront();
  await send(page, 'seen in both tabs');
  await expect(transcript(other).locator('[data-kind="agent"]').last()).toHaveText('echo: seen in both tabs');
  await expect(transcript(other).locator('[data-kind="user"]').last()).toHaveText('seen in both tabs');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: seen in both tabs');
  // no duplicates in either tab
  await expect(transcript(other).locator('[data-kind="user"]')).toHaveCount(2);
  await expect(transcript(page).locator('[data-kind="user"]')).toHaveCount(2);
  await expect(transcript(other).locator('[data-kind="agent"]')).toHaveCount(2);
});

test('sessions as tabs, controls, and their errors', async ({ page, kandev }) => {
  const task = await openTask(page, kandev, 'Sessions');
  await expect(state(page)).toHaveText('WAITING_FOR_INPUT');
  // a second session
  await page.getByRole('button', { name: 'New session' }).click();
  const dialog = page.getByRole('dialog', { name: 'New session' });
  await dialog.getByLabel('First message').fill('hello from session two');
  await dialog.getByRole('button', { name: 'Start agent' }).click();
  await expect(page.getByRole('tab', { name: /Mock 2/ })).toHaveAttribute('aria-selected', 'true');
  await expect(transcript(page).locator('[data-kind="agent"]')).toHaveText(['echo: hello from session two']);
  await page.getByRole('tab', { name: /Mock 1/ }).click();
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Sessions');

  // reset context (after a yes): works, or the server says it does not have the action yet
  await page.getByRole('button', { name: 'Reset context' }).click();
  await page.getByRole('dialog', { name: "Reset the agent's context?" }).getByRole('button', { name: 'Reset context' }).click();
  const probe = await fetch(`${kandev.url}/api/v1/session.reset_context`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: 'missing' }),
  }).then((r) => r.json());
  if (probe.code === 'UNKNOWN_ACTION') {
    await expect(page.getByTestId('action-error')).toContainText('does not offer that action yet');
    await page.getByTestId('action-error').getByRole('button', { name: 'Dismiss' }).click();
  }

  // resume fresh, then stop, then delete
  await page.getByRole('button', { name: 'Resume ▾' }).click();
  await page.getByRole('menuitem', { name: /Resume fresh/ }).click();
  await expect(page.getByTestId('action-error')).toHaveCount(0);
  await page.getByRole('button', { name: 'Stop', exact: true }).click();
  await expect(state(page)).toHaveText(/COMPLETED|CANCELLED|WAITING_FOR_INPUT/);
  await page.getByRole('button', { name: 'Delete', exact: true }).click();
  await page.getByRole('dialog', { name: 'Delete this session?' }).getByRole('button', { name: 'Delete session' }).click();
  await expect(page.getByRole('tab', { name: /Mock/ })).toHaveCount(1);
  const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
  expect(sessions).toHaveLength(1);
});

test('an agent crash shows the last error, and the next message recovers', async ({ page, kandev }) => {
  await openTask(page, kandev, 'Crash', '#!mock\nsay about to crash\ncrash 3');
  const banner = page.getByTestId('last-error');
  await expect(banner).toBeVisible();
  await expect(banner).toContainText(/resume|try again/i);
  await expect(page.getByTestId('session-state')).not.toHaveText(/RUNNING|STARTING/);
  await send(page, 'are you back?');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: are you back?', {
    timeout: 30_000,
  });
});

test('i13 a message taller than the transcript is shown, and the page goes on live', async ({ page, kandev }) => {
  // A new row far taller than its estimated height, at the bottom of a transcript that sticks
  // to the bottom: the list used to re-lay itself out without end (React error 185, blank page).
  await openTask(page, kandev, 'Tall');
  const lines = Array.from({ length: 120 }, (_, i) => `line ${i}`);
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill(['A long paste', ...lines].join('\n'));
  await box.press('Enter');
  const log = transcript(page);
  await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: A long paste');
  await expect(log.locator('[data-kind="user"]').last()).toContainText('line 119');
  await send(page, 'still here');
  await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: still here');
});
