// Issue 52 scope 1 in the browser: a session moves to another agent profile from its bar (the
// transcript says "Moved from A to B" and the new agent answers the handoff), and a session
// whose profile was deleted shows a banner, refuses a message with the server's reason, and
// moves to another agent from the banner.
import type { Page } from '@playwright/test';
import { expect, type Kandev, screenshot, test, transcript } from './kandev';

async function mockProfile(kandev: Kandev, name: string): Promise<string> {
  return (await kandev.api('agent.profile.create', { name, kind: 'mock' })).profile.id;
}

/** A task started on `profileId` (its first prompt is the title), opened at its first reply. */
async function launched(page: Page, kandev: Kandev, title: string, profileId: string): Promise<string> {
  const { workflowId } = await kandev.board();
  const { task, session } = await kandev.api('task.create', {
    workflow_id: workflowId,
    title,
    agent_profile_id: profileId,
    start_agent: true,
  });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText(`echo: ${title}`);
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  return session.id;
}

const handoffAnswer = /^echo: You are taking over this task from another agent/;

test('i52: a session moves to another agent, and one of a deleted profile moves from its banner', async ({
  page,
  kandev,
}) => {
  const a = await mockProfile(kandev, 'Agent A');
  const b = await mockProfile(kandev, 'Agent B');
  const c = await mockProfile(kandev, 'Agent C');
  const moved = await launched(page, kandev, 'Move me', a);
  expect((await kandev.api('session.get', { id: moved })).session.agent_profile_id).toBe(a);

  // From the session bar: the picker offers every profile but the session's own.
  await page.getByRole('button', { name: 'Move to another agent…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Move to another agent' });
  await expect(dialog).toContainText('The same worktree and transcript; the new agent starts a new conversation');
  const picker = dialog.getByRole('combobox', { name: 'Move to' });
  await expect(picker.locator('option')).toHaveText(['Mock', 'Agent B', 'Agent C']); // the built-in profile, not A
  await picker.selectOption({ label: 'Agent B' });
  await screenshot(page, 'i52-move-dialog');
  await dialog.getByRole('button', { name: 'Move', exact: true }).click();
  await expect(dialog).toHaveCount(0);
  const log = transcript(page);
  await expect(log.locator('[data-reason="rebound"]')).toContainText('Moved from Agent A to Agent B');
  await expect(log.locator('[data-kind="user"]').nth(1)).toContainText('You are taking over this task');
  await expect(log.locator('[data-kind="agent"]').nth(1)).toHaveText(handoffAnswer);
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');

  // A session of a profile deleted while it was stopped.
  const orphan = await launched(page, kandev, 'Orphan', c);
  await kandev.api('session.stop', { id: orphan });
  await kandev.api('agent.profile.delete', { id: c });
  await page.reload();
  const banner = page.getByTestId('deleted-profile');
  await expect(banner).toContainText(
    'The agent profile Agent C of this session was deleted. Move the session to another agent to go on.',
  );
  await expect(page.getByLabel('Message to the agent')).toHaveAttribute('placeholder', /Agent C was deleted/);
  // The controls that would start its agent are disabled, and say why.
  const controls = page.getByRole('toolbar', { name: 'Session controls' });
  for (const name of ['Resume ▾', 'Retry last message', 'Reset context']) {
    const button = controls.getByRole('button', { name, exact: true });
    await expect(button).toBeDisabled();
    await expect(button).toHaveAttribute('title', /move the session to another agent/);
  }
  // A message sent anyway is refused with the server's reason, and nothing is recorded.
  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill('are you there?');
  await box.press('Enter');
  await expect(page.locator('.composer [role="alert"]')).toContainText(
    'the agent profile Agent C of this session was deleted: move the session to another agent to go on',
  );
  await expect(transcript(page).locator('[data-kind="user"]')).toHaveCount(1);
  await screenshot(page, 'i52-deleted-profile');

  const inline = banner.getByRole('combobox', { name: 'Move to' });
  await expect(inline.locator('option')).toHaveText(['Mock', 'Agent A', 'Agent B']);
  await inline.selectOption({ label: 'Agent B' });
  await banner.getByRole('button', { name: 'Move', exact: true }).click();
  await expect(banner).toHaveCount(0);
  const orphanLog = transcript(page);
  await expect(orphanLog.locator('[data-reason="rebound"]')).toContainText('Moved from Agent C to Agent B');
  await expect(orphanLog.locator('[data-kind="agent"]').nth(1)).toHaveText(handoffAnswer);
  const { session } = await kandev.api('session.get', { id: orphan });
  expect([session.agent_profile_id, session.deleted_profile]).toEqual([b, null]);
});
