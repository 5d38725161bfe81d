// Issue 14 acceptance 3: screenshots of the board, the task page (running, needs you, stopped,
// error) and Changes, at 1440×900 and 390×844, into test-artifacts/ (i14-<size>-<view>.png).
import type { Page } from '@playwright/test';
import { expect, type Kandev, openBoard, screenshot, test, transcript } from './kandev';

async function started(kandev: Kandev, title: string, script?: string): Promise<{ id: string; sessionId: string }> {
  const { task, session } = await kandev.api('task.create', {
    workflow_id: (await kandev.board()).workflowId,
    title,
    description: 'Screenshot of issue 14',
    start_agent: true,
  });
  if (script) {
    await expect
      .poll(async () => (await kandev.api('session.get', { id: session.id })).session.state, { timeout: 20_000 })
      .toBe('WAITING_FOR_INPUT');
    await kandev.api('message.add', { session_id: session.id, content: script });
  }
  return { id: task.id, sessionId: session.id };
}

async function shoot(page: Page, kandev: Kandev, size: string) {
  const running = await started(kandev, 'Refactor the parser', '#!mock\nsay Reading the parser…\nsleep 30000');
  const asking = await started(kandev, 'Update the README', '#!mock\nask_permission Edit README.md\nsay done');
  const stopped = await started(kandev, 'Tidy the imports');
  const failing = await started(kandev, 'Flaky build', '#!mock\ncrash');
  const { steps } = await kandev.board();
  await kandev.createTask('Write release notes', { step_id: steps.find((s) => s.name === 'Backlog')!.id });

  await page.goto(`${kandev.url}/tasks/${stopped.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Tidy the imports');
  // On a phone the session's controls are behind More….
  if (size === 'phone') await page.getByRole('button', { name: 'More…' }).click();
  await page.getByRole('toolbar', { name: 'Session controls' }).getByRole('button', { name: 'Stop' }).click();
  await expect(transcript(page).locator('[data-kind="status"]').last()).toContainText('agent stopped');
  await screenshot(page, `i14-${size}-task-stopped`);

  await page.goto(`${kandev.url}/tasks/${running.id}`);
  await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('Reading the parser…');
  await screenshot(page, `i14-${size}-task-running`);

  await page.goto(`${kandev.url}/tasks/${asking.id}`);
  await expect(page.getByTestId('needs-you')).toBeVisible();
  await screenshot(page, `i14-${size}-task-needs-you`);

  await page.goto(`${kandev.url}/tasks/${failing.id}`);
  await expect(page.getByTestId('needs-you')).toContainText('failed');
  await screenshot(page, `i14-${size}-task-error`);

  await page.goto(`${kandev.url}/tasks/${failing.id}?tab=changes`);
  await expect(page.getByTestId('changes-empty')).toBeVisible();
  await screenshot(page, `i14-${size}-changes`);

  await openBoard(page, kandev);
  await expect(page.locator('.card[data-needs-you]')).toHaveCount(2);
  await screenshot(page, `i14-${size}-board`);
  await kandev.api('agent.cancel', { session_id: running.sessionId });
}

test.describe('desktop', () => {
  test.use({ viewport: { width: 1440, height: 900 } });
  test('i14 screenshots at 1440×900', async ({ page, kandev }) => shoot(page, kandev, 'desktop'));
});

test.describe('phone', () => {
  test.use({ viewport: { width: 390, height: 844 }, hasTouch: true });
  test('i14 screenshots at 390×844', async ({ page, kandev }) => shoot(page, kandev, 'phone'));
});
