// Issue 13 (web): a failure is shown to the person, never swallowed. Reads that used to fail
// silently (installed agents, workflow templates, older transcript pages, the board's read
// after a refused move) now say what failed, and the page recovers when the server is back.
import { rmSync } from 'node:fs';
import type { Page } from '@playwright/test';
import { expect, freePort, openBoard, startKandev, test, transcript } from './kandev';

const UNREACHABLE = /cannot be reached/;

test('i13 reads that fail while the server is down are shown, and Retry recovers', async ({ page }) => {
  const port = await freePort();
  const kandev = await startKandev(`127.0.0.1:${port}`);
  try {
    await openBoard(page, kandev);
    await kandev.stop('SIGTERM');
    await expect(page.getByTestId('connection')).toHaveText(/Reconnecting/);

    // Client-side navigation: the page is loaded, its reads go to the stopped server.
    await page.getByRole('link', { name: 'Settings', exact: true }).click();
    await expect(page.getByTestId('agent-kinds-error')).toContainText(UNREACHABLE);
    await page.getByRole('link', { name: 'Workflows' }).click();
    const templates = page.getByTestId('templates-error');
    await expect(templates).toContainText(UNREACHABLE);

    await kandev.start(); // same port, same home
    await expect(page.getByTestId('connection')).toHaveText('Live', { timeout: 20_000 });
    await templates.getByRole('button', { name: 'Retry' }).click();
    await expect(templates).toHaveCount(0);
    const create = page.getByRole('form', { name: 'New workflow' });
    await expect(create.getByLabel('Template').locator('option[value="plan-build"]')).toHaveCount(1);
    await page.getByRole('link', { name: 'Agent profiles' }).click();
    await expect(page.getByTestId('agent-kinds').getByRole('row', { name: /mock/ })).toContainText('installed');
    await expect(page.getByTestId('agent-kinds-error')).toHaveCount(0);
  } finally {
    await kandev.stop('SIGTERM');
    rmSync(kandev.home, { recursive: true, force: true });
  }
});

test('i13 a refused move is shown until dismissed, and the card goes back', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const review = steps.find((s) => s.name === 'Review')!;
  const done = steps.find((s) => s.name === 'Done')!;
  await kandev.api('workflow.step.update', { id: done.id, allow_manual_move: false });
  await kandev.createTask('Stays in review', { step_id: review.id });
  await openBoard(page, kandev);
  const col = (name: string) => page.locator(`section.column[data-step-name="${name}"]`);
  const card = page.locator('.card', { hasText: 'Stays in review' });
  await expect(col('Review').locator('.card')).toHaveText([/Stays in review/]);

  await card.focus();
  await page.keyboard.press(']');
  const banner = page.getByRole('alert').filter({ hasText: 'does not accept manual moves' });
  await expect(banner).toContainText('does not accept manual moves');
  // the board was read again: the card is back where the server has it
  await expect(col('Review').locator('.card')).toHaveText([/Stays in review/]);
  await expect(col('Done').getByTestId('column-count')).toHaveText('0');
  // and the message stays after that read, until dismissed
  await expect(banner).toContainText('does not accept manual moves');
  await banner.getByRole('button', { name: 'Dismiss' }).click();
  await expect(banner).toHaveCount(0);
});

/** Scrolls the transcript to its top (where older pages are read). */
async function scrollToTop(page: Page): Promise<void> {
  await page.locator('.transcript').evaluate((el) => {
    el.scrollTop = 0;
    el.dispatchEvent(new Event('scroll'));
  });
}

test('i13 older messages that cannot be read are shown, and read once the server is back', async ({ page }) => {
  const port = await freePort();
  const kandev = await startKandev(`127.0.0.1:${port}`);
  try {
    // 500 messages: more than the newest page (200), so older ones are read on scroll up
    const script = ['#!mock', ...Array.from({ length: 250 }, (_, i) => `say reply ${i}\nthink thought ${i}`)].join('\n');
    const task = await kandev.createTask('Long talk', { start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    const log = transcript(page);
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Long talk');
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
    const box = page.getByRole('textbox', { name: 'Message to the agent' });
    await box.fill(script);
    await box.press('Enter');
    await expect(log.locator('[data-kind="thought"]').last()).toContainText('thought 249');
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
    // a fresh page holds the newest 200 messages only
    await page.reload();
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('reply 249');
    await expect(page.getByTestId('connection')).toHaveText('Live');

    await kandev.stop('SIGTERM');
    await expect(page.getByTestId('connection')).toHaveText(/Reconnecting/);
    await scrollToTop(page);
    const banner = page.getByTestId('session-error');
    await expect(banner).toContainText(/Older messages could not be read: .*cannot be reached/);

    // back: the session is read again after the reconnect (which clears the message), and
    // scrolling up reads the older messages
    await kandev.start();
    await expect(page.getByTestId('connection')).toHaveText('Live', { timeout: 20_000 });
    await expect(banner).toHaveCount(0);
    await expect(async () => {
      await scrollToTop(page);
      await expect(log.locator('[data-kind="user"]').first()).toContainText('Long talk', { timeout: 1_000 });
    }).toPass();
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Long talk');
  } finally {
    await kandev.stop('SIGTERM');
    rmSync(kandev.home, { recursive: true, force: true });
  }
});
