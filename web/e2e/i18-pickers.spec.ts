// Issue 18 acceptance 5 (part): the session's mode and model are switched from pickers, and
// the badges show what the mock agent confirmed.
import { expect, test, transcript } from './kandev';

test('i18 a5: switch mode and model from the pickers; the mock confirms', async ({ page, kandev }) => {
  const task = await kandev.createTask('Pickers', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Pickers');
  const mode = page.getByRole('combobox', { name: 'Mode', exact: true });
  const model = page.getByRole('combobox', { name: 'Model', exact: true });
  await expect(mode.locator('option')).toHaveText(['Default', 'Plan']);
  await expect(model.locator('option')).toHaveText(['Mock Fast', 'Mock Smart']);
  await expect(model).toHaveValue('mock-fast');
  await mode.selectOption('plan');
  await expect(page.getByText('mode: plan')).toBeVisible();
  await model.selectOption('mock-smart');
  await expect(page.getByTestId('session-model')).toHaveText('model: mock-smart');
  const sessions = await kandev.api('task.session.list', { task_id: task.id });
  const session = sessions.sessions[0];
  expect(session.session_mode).toBe('plan');
  expect(session.config_options.model).toBe('mock-smart');
  await page.reload();
  await expect(page.getByRole('combobox', { name: 'Mode', exact: true })).toHaveValue('plan');
  await expect(page.getByRole('combobox', { name: 'Model', exact: true })).toHaveValue('mock-smart');
});
