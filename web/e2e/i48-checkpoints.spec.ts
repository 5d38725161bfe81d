// Issue 48: "Revert to before this turn" under a turn's prompt asks first, listing the turns
// it undoes and the files it changes back, names a file changed outside the agent's turns
// (reverting only once that is confirmed too, and never discarding a file it did not show),
// and "Changes of this turn" shows its diff.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, git, gitRepo, removeRepo, screenshot, send, test, transcript } from './kandev';

test('i48: revert to before a turn from the transcript, with outside edits named', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': 'hello\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Undo', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    const log = transcript(page);
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Undo');
    await send(page, '#!mock\nwrite a.txt first\nsay one');
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('one');
    await send(page, '#!mock\nwrite b.txt second\nwrite README.md changed\\n\nsay two');
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('two');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const worktree = sessions[0].cwd as string;

    // Turn 3's tools sit under its prompt; its diff shows what it changed.
    const third = log.locator('[data-testid="turn-tools"][data-turn="3"]');
    await third.getByRole('button', { name: 'Changes of this turn' }).click();
    const diff = page.getByRole('dialog', { name: 'Changes of turn 3' });
    await expect(diff.locator('.diff-file')).toHaveCount(2);
    await expect(diff.locator('.diff-file').first()).toHaveAttribute('data-path', 'README.md');
    await diff.getByRole('button', { name: 'Close' }).click();

    // Someone edits a file in a terminal after the last turn.
    writeFileSync(join(worktree, 'a.txt'), 'edited by hand\n');
    const second = log.locator('[data-testid="turn-tools"][data-turn="2"]');
    await second.getByRole('button', { name: 'Revert to before this turn' }).click();
    const ask = page.getByRole('dialog', { name: 'Revert to before turn 2?' });
    await expect(ask.getByRole('list', { name: 'Turns undone' }).locator('li')).toHaveText([/^Turn 2/, /^Turn 3/]);
    await expect(ask.getByRole('list', { name: 'Files changed back' }).locator('li')).toHaveText(['README.md', 'a.txt', 'b.txt']);
    await expect(ask.getByRole('list', { name: 'Changed outside the agent' }).locator('li')).toHaveText(['a.txt']);
    const revert = ask.getByRole('button', { name: 'Revert files' });
    await expect(revert).toBeDisabled();
    await screenshot(page, 'i48-revert-confirm');
    // A file made after the dialog showed its list is not discarded with that list: the
    // revert is refused, and the dialog shows the lists again with the reason.
    writeFileSync(join(worktree, 'late.txt'), 'made while the dialog was open\n');
    await ask.getByLabel('Discard those changes too').check();
    await revert.click();
    await expect(ask.getByRole('alert').first()).toContainText('Not reverted');
    await expect(ask.getByRole('alert').first()).toContainText('late.txt');
    await expect(ask.getByRole('list', { name: 'Changed outside the agent' }).locator('li')).toHaveText(['a.txt', 'late.txt']);
    expect(existsSync(join(worktree, 'late.txt'))).toBe(true);
    await ask.getByLabel('Discard those changes too').check();
    await revert.click();
    await expect(page.getByText('Files reverted to before turn 2: 4 files changed back')).toBeVisible();
    expect(git(worktree, 'status', '--porcelain')).toBe('');
    await expect(log.locator('[data-kind="status"]').last()).toContainText('Files reverted to before turn 2: turns 2, 3 undone');
    await expect(third.getByText('undone by a revert')).toBeVisible();
    await expect(second.getByRole('button', { name: 'Revert to before this turn' })).toHaveCount(0);

    // The agent hears about it with the next message.
    await send(page, 'go on');
    await expect(log.locator('[data-kind="agent"]').last()).toContainText('echo: [Kandev] The user reverted');
  } finally {
    removeRepo(repo);
  }
});
