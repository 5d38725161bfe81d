// Issue 44 item 5: on a wide screen the Changes tab has the chat beside the diff, so the
// review goes on while talking to the agent (a message sent there changes the diff shown
// beside it); on a phone one tap goes from the diff to the chat and back.
import type { Page } from '@playwright/test';
import { expect, gitRepo, type Kandev, removeRepo, screenshot, send, test, transcript } from './kandev';

/** A task on a fresh repository whose agent has written `notes.txt`, its page open. */
async function taskWithChange(page: Page, kandev: Kandev, repo: string): Promise<string> {
  const { workspaceId } = await kandev.board();
  const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
  const task = await kandev.createTask('Beside', { repository_ids: [repository.id], start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Beside');
  await send(page, '#!mock\nwrite notes.txt first\nsay wrote it');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote it');
  return task.id;
}

test.describe('wide', () => {
  test.use({ viewport: { width: 1440, height: 900 } });

  test('i44: the chat sits beside the diff, and talking to the agent there updates the diff', async ({ page, kandev }) => {
    const repo = gitRepo({ 'README.md': '# demo\n' });
    try {
      await taskWithChange(page, kandev, repo);
      await page.getByRole('tab', { name: 'Changes' }).click();
      const diff = page.locator('.diff-file[data-path="notes.txt"]');
      const chat = page.getByRole('complementary', { name: 'Chat beside the diff' });
      await expect(diff).toBeVisible();
      await expect(transcript(page)).toBeVisible();
      await expect(chat.getByRole('log', { name: 'Conversation' })).toBeVisible();
      const [d, c] = [await diff.boundingBox(), await chat.boundingBox()];
      // Side by side, not stacked: the chat under its session tab on the left, the diff under
      // Changes on the right.
      expect(c!.x + c!.width).toBeLessThanOrEqual(d!.x);
      await screenshot(page, 'i44-chat-beside-the-diff');

      // A message sent beside the diff: the agent's turn changes the diff in place.
      await send(page, '#!mock\nwrite later.txt second\nsay wrote another');
      await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote another');
      await expect(page.locator('.diff-file[data-path="later.txt"]')).toBeVisible();
      await expect(page.getByRole('tab', { name: 'Changes' })).toHaveAttribute('aria-selected', 'true');
    } finally {
      removeRepo(repo);
    }
  });
});

test.describe('phone', () => {
  test.use({ viewport: { width: 390, height: 844 }, hasTouch: true });

  test('i44: on a phone one tap goes from the diff to the chat and back', async ({ page, kandev }) => {
    const repo = gitRepo({ 'README.md': '# demo\n' });
    try {
      await taskWithChange(page, kandev, repo);
      await page.getByRole('tab', { name: 'Changes' }).tap();
      const diff = page.locator('.diff-file[data-path="notes.txt"]');
      await expect(diff).toBeVisible();
      await expect(page.getByRole('complementary', { name: 'Chat beside the diff' })).toHaveCount(0);
      await expect(transcript(page)).toHaveCount(0);
      await page.getByRole('tab', { name: /^Mock 1/ }).tap();
      await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote it');
      await expect(diff).toHaveCount(0);
      await page.getByRole('tab', { name: 'Changes' }).tap();
      await expect(diff).toBeVisible();
    } finally {
      removeRepo(repo);
    }
  });
});
