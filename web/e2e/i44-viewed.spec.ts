// Issue 44 item 3 (viewed marks, acceptance 3): a file marked viewed in the Changes tab is
// folded, stays viewed after a reload (the mark is on the server), and is unviewed once the
// agent changes it.
import { expect, gitRepo, removeRepo, send, test, transcript } from './kandev';

test('i44: a viewed mark survives a reload and resets when the file changes', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# demo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Review me', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Review me');
    await send(page, '#!mock\nwrite notes.txt first draft\nsay wrote it');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote it');

    await page.getByRole('tab', { name: 'Changes' }).click();
    const file = page.locator('.diff-file[data-path="notes.txt"]');
    await expect(file.locator('.dl-add')).toContainText('first draft');
    await expect(page.getByTestId('viewed-count')).toHaveText('0 of 1 viewed');
    await page.getByRole('checkbox', { name: 'Viewed notes.txt' }).check();
    await expect(page.getByTestId('viewed-count')).toHaveText('1 of 1 viewed');
    await expect(file).not.toHaveAttribute('open', '');

    await page.reload();
    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.getByRole('checkbox', { name: 'Viewed notes.txt' })).toBeChecked();
    await expect(page.getByTestId('viewed-count')).toHaveText('1 of 1 viewed');

    // The agent changes the file (the tab reads the changes again when its turn ends): its
    // diff is not the one that was viewed.
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    await kandev.api('message.add', {
      session_id: sessions[0].id,
      content: '#!mock\nwrite notes.txt second draft\nsay rewrote it',
    });
    await expect(page.getByRole('checkbox', { name: 'Viewed notes.txt' })).not.toBeChecked();
    await expect(page.getByTestId('viewed-count')).toHaveText('0 of 1 viewed');
    await expect(page.locator('.diff-file[data-path="notes.txt"] .dl-add')).toContainText('second draft');
  } finally {
    removeRepo(repo);
  }
});
