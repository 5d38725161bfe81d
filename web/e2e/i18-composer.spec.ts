// Issue 18 acceptance 5 (part): the composer offers the agent's slash commands on `/`, and
// the session bar shows the context window use the agent reported, also after a reload.
import { expect, send, test, transcript } from './kandev';

test('i18 a5: `/` shows the mock agent’s commands and choosing one sends /name args', async ({ page, kandev }) => {
  const task = await kandev.createTask('Commands', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Commands');
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill('/');
  const menu = page.getByRole('listbox', { name: 'Agent commands' });
  await expect(menu.getByRole('option')).toHaveText([
    '/echo text — Echo the first line back',
    '/script directives — Run a #!mock script',
  ]);
  await box.pressSequentially('s');
  await expect(menu.getByRole('option')).toHaveText(['/script directives — Run a #!mock script']);
  await box.fill('/');
  await box.press('Enter'); // the highlighted (first) one
  await expect(box).toHaveValue('/echo ');
  await expect(menu).toHaveCount(0);
  await box.pressSequentially('hello there');
  await box.press('Enter');
  await expect(box).toHaveValue('');
  await expect(transcript(page).locator('[data-kind="user"]').nth(1)).toHaveText('/echo hello there');
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('echo: /echo hello there');
});

test('i18 a5: the context window use the agent reports is shown, and still after a reload', async ({ page, kandev }) => {
  const task = await kandev.createTask('Usage', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Usage');
  await expect(page.getByTestId('session-usage')).toHaveCount(0);
  await send(page, '#!mock\nusage 1200 200000 900 300\nsay counted');
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('counted');
  await expect(page.getByTestId('session-usage')).toHaveText('context 1,200 / 200,000');
  await page.reload();
  await expect(page.getByTestId('session-usage')).toHaveText('context 1,200 / 200,000');
});
