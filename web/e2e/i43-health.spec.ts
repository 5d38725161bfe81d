// Issue 43 (scope 5): Settings › Health shows the server's own checks (system.doctor); a
// profile whose agent is not installed is a problem with its install line, and checking again
// after it is removed finds none.
import { expect, test } from './kandev';

test('i43: settings health lists the checks and names a missing agent with its fix', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/health`);
  const table = page.getByRole('table', { name: 'Health checks' });
  await expect(table.getByRole('row', { name: /^git ok git version/ })).toBeVisible();
  await expect(table.getByRole('row', { name: /^database integrity ok ok/ })).toBeVisible();
  await expect(page.getByTestId('health-summary')).toHaveText('No problem found.');

  const created = await kandev.api('agent.profile.create', {
    name: 'Missing agent',
    kind: 'gemini',
    command: 'kandev-no-such-agent',
  });
  await page.getByRole('button', { name: 'Check again' }).click();
  const missing = table.getByRole('row', { name: /^agent gemini problem/ });
  await expect(missing).toContainText('kandev-no-such-agent (profile "Missing agent") is not installed');
  await expect(missing).toContainText('npm install -g @google/gemini-cli');
  await expect(page.getByTestId('health-summary')).toHaveText('1 problem: each says what fixes it.');

  await kandev.api('agent.profile.delete', { id: created.profile.id });
  await page.getByRole('button', { name: 'Check again' }).click();
  await expect(page.getByTestId('health-summary')).toHaveText('No problem found.');
});
