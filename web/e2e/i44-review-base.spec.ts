// Issue 44 item 2: after a rebase the Changes tab compares with the merge base of the task
// branch and the base branch as it is now, so a commit made on the base is not shown as the
// task's own change.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, git, gitRepo, removeRepo, test, transcript } from './kandev';

test('i44: after a rebase the changes tab shows only the task’s own files', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# demo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Rebased', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Rebased');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const worktree = sessions[0].cwd as string;
    writeFileSync(join(worktree, 'task.txt'), 'the task’s work\n');
    git(worktree, 'add', 'task.txt');
    git(worktree, 'commit', '-q', '-m', 'task work');
    writeFileSync(join(repo, 'base.txt'), 'made on main\n');
    git(repo, 'add', 'base.txt');
    git(repo, 'commit', '-q', '-m', 'base moves');
    const baseTip = git(repo, 'rev-parse', 'HEAD');

    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.locator('.diff-file[data-path="task.txt"]')).toBeVisible();
    await page.getByRole('button', { name: 'Rebase' }).click();
    await expect(page.getByTestId('ship-note')).toContainText('Rebased');
    expect(git(worktree, 'log', '--format=%s', '-2')).toBe('task work\nbase moves');
    // A fresh look at the tab: only the task's file, against the new base.
    await page.reload();
    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.locator('.diff-file[data-path="task.txt"]')).toBeVisible();
    await expect(page.locator('.diff-file[data-path="base.txt"]')).toHaveCount(0);
    const changes = await kandev.api('task.changes', { task_id: task.id });
    expect(changes.worktrees[0].base_commit).toBe(baseTip);
  } finally {
    removeRepo(repo);
  }
});
