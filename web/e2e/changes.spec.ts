// The Changes tab shows a file the agent wrote in the task's worktree, and commits it.
import { expect, gitRepo, removeRepo, send, test, transcript } from './kandev';

test('the changes tab shows the agent’s file and commits it', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# demo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Write notes', { repository_ids: [repository.id], start_agent: true });

    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Write notes');
    await send(page, '#!mock\nwrite notes.txt hello from the agent\nsay wrote it');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote it');

    await page.getByRole('tab', { name: 'Changes' }).click();
    const file = page.locator('.diff-file[data-path="notes.txt"]');
    await expect(file).toBeVisible();
    await expect(file.locator('.dl-add')).toContainText('hello from the agent');
    await page.getByLabel('Commit message').fill('Add notes');
    await page.getByRole('button', { name: 'Commit all' }).click();
    await expect(page.getByRole('status').filter({ hasText: 'Committed' })).toBeVisible();
  } finally {
    removeRepo(repo);
  }
});
