// Issue 18 scope 3 (part): an agent that asks for a login shows its login methods as buttons;
// choosing one authenticates over the live connection (no restart) and the next message runs.
import { expect, send, test, transcript } from './kandev';

test('i18: agent_auth_required shows a button per login method; one logs in without a restart', async ({
  page,
  kandev,
}) => {
  const { profile } = await kandev.api('agent.profile.create', {
    name: 'Needs login',
    kind: 'mock',
    args: ['--require-auth'],
  });
  const task = await kandev.createTask('Log me in', { start_agent: true, agent_profile_id: profile.id });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  const error = page.getByTestId('last-error');
  await expect(error).toContainText('log in to Kandev mock agent');
  const methods = error.getByRole('group', { name: 'Log in to the agent' }).getByRole('button');
  await expect(methods).toHaveText(['Log in: Mock login', 'Log in: Mock token']);
  await methods.nth(1).click();
  await expect(error).toHaveCount(0);
  await expect(transcript(page).getByText('authenticated with Mock token')).toBeVisible();
  await send(page, 'after login');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: after login');
});
