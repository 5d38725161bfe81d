// A Plan & Build task: planned in plan mode, moved to Build from the board with the keyboard,
// where the agent gets a fresh context and the build prompt; the page shows it all live.
import { expect, openBoard, test, transcript } from './kandev';

test('a Plan & Build task moves from Plan to Build with a fresh context', async ({ page, kandev }) => {
  const { workspaceId } = await kandev.board();
  const { workflow } = await kandev.api('workflow.create', {
    workspace_id: workspaceId,
    name: 'Plan & Build',
    template_id: 'plan-build',
  });
  await openBoard(page, kandev);
  await page.getByRole('combobox', { name: 'Board' }).selectOption(workflow.id);
  await expect(page.locator('section.column[data-step-name="Plan"]')).toBeVisible();

  await page.getByRole('button', { name: 'New task' }).click();
  const dialog = page.getByRole('dialog', { name: 'New task' });
  await dialog.getByLabel('Title').fill('Add a --verbose flag');
  await dialog.getByRole('button', { name: 'Create task' }).click();
  const card = page.locator('section.column[data-step-name="Plan"] .card', { hasText: 'Add a --verbose flag' });
  await expect(card).toBeVisible();

  await card.click();
  const log = transcript(page);
  await expect(page.locator('.badge.plan')).toBeVisible();
  await expect(log.locator('[data-kind="agent"]').first()).toContainText('[plan mode]');
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  await expect(page.getByTestId('task-step')).toHaveText('Plan');

  await page.getByRole('button', { name: 'Back to the board' }).click();
  await page.locator('.card', { hasText: 'Add a --verbose flag' }).focus();
  await page.keyboard.press(']');
  await expect(page.locator('section.column[data-step-name="Build"] .card, section.column[data-step-name="Review"] .card')).toHaveText([
    /Add a --verbose flag/,
  ]);

  await page.locator('.card', { hasText: 'Add a --verbose flag' }).click();
  await expect(log.locator('[data-kind="status"]').filter({ hasText: /context reset/ })).toBeVisible();
  await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: Implement the plan for: Add a --verbose flag');
  await expect(page.locator('.badge.plan')).toHaveCount(0);
  // the build turn's end moves the task on to Review
  await expect(page.getByTestId('task-step')).toHaveText('Review');
});
