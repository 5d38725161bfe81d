// A phone-sized screen: the board is a step switcher, the task page is full screen.
import { expect, openBoard, screenshot, send, test, transcript } from './kandev';

test.use({ viewport: { width: 390, height: 844 }, hasTouch: true });

test('board as a step switcher and a full-screen task page on a phone', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  await kandev.createTask('Waiting in the backlog', { step_id: backlog.id });
  await openBoard(page, kandev);
  const switcher = page.getByRole('tablist', { name: 'Steps' });
  await expect(switcher).toBeVisible();
  await expect(page.locator('section.column:visible')).toHaveCount(1);
  await expect(page.locator('.card', { hasText: 'Waiting in the backlog' })).toBeVisible();

  await page.getByRole('button', { name: 'New task' }).tap();
  const dialog = page.getByRole('dialog', { name: 'New task' });
  await dialog.getByLabel('Title').fill('From my phone');
  await dialog.getByLabel('Step').selectOption({ label: 'Backlog' });
  await dialog.getByLabel('Start the agent now').check(); // Backlog alone would not start it
  await dialog.getByRole('button', { name: 'Create task' }).tap();
  await expect(dialog).toBeHidden();
  const card = page.locator('.card', { hasText: 'From my phone' });
  await expect(card).toBeVisible();
  await switcher.getByRole('tab', { name: /Review/ }).tap();
  await expect(page.locator('section.column:visible')).toHaveAttribute('data-step-name', 'Review');
  await expect(card).toBeHidden();
  await switcher.getByRole('tab', { name: /Backlog/ }).tap();
  await expect(card).toBeVisible();
  await expect(switcher.getByRole('tab', { name: /Backlog/ })).toContainText('2');
  // no horizontal scrolling on a phone
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await screenshot(page, 'board-phone');

  await card.tap();
  await expect(page.locator('.topbar')).toBeHidden(); // full screen
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: From my phone');
  await send(page, 'typed on a phone');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: typed on a phone');
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  await screenshot(page, 'task-phone');
  await page.getByRole('button', { name: 'Back to the board' }).tap();
  await expect(page.getByRole('tablist', { name: 'Steps' })).toBeVisible();
});
