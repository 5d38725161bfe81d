// Issue 44 item 6: Merge opens a composer (strategy and message, prefilled from the task)
// before anything changes, and merges with what was chosen; the note of a success looks
// unlike a refusal's; the merged task says "merged".
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, git, gitRepo, openBoard, removeRepo, test, transcript } from './kandev';

test('i44: merge goes through a composer with the strategy and message chosen', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# demo\n' });
  try {
    // The base is not checked out anywhere: merging into it changes no one's files.
    git(repo, 'checkout', '-q', '--detach');
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Merge me', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Merge me');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const worktree = sessions[0].cwd as string;
    writeFileSync(join(worktree, 'work.txt'), 'done\n');
    git(worktree, 'add', 'work.txt');
    git(worktree, 'commit', '-q', '-m', 'the work');
    const before = git(repo, 'rev-parse', 'main');

    await page.getByRole('tab', { name: 'Changes' }).click();
    // Uncommitted work: the merge composer says it is left out, and a refused pull request
    // keeps what was typed for the next try.
    writeFileSync(join(worktree, 'wip.txt'), 'not yet\n');
    await page.getByRole('button', { name: 'Refresh' }).click();
    await expect(page.getByTestId('git-status')).toContainText('1 uncommitted');
    await page.getByRole('button', { name: 'Merge…' }).click();
    const warned = page.getByRole('dialog', { name: 'Merge into the base branch' });
    await expect(warned.getByTestId('merge-dirty')).toContainText('1 uncommitted file is not part of the merge');
    await warned.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('button', { name: 'Create PR…' }).click();
    const pr = page.getByRole('dialog', { name: 'Create pull request' });
    await pr.getByLabel('Title').fill('My careful title');
    await pr.getByRole('button', { name: 'Create pull request' }).click();
    await expect(page.getByTestId('ship-note')).toContainText('commit them first, then open the pull request');
    await expect(page.getByTestId('ship-note')).not.toContainText('task.commit');
    await page.getByRole('button', { name: 'Create PR…' }).click();
    await expect(pr.getByLabel('Title')).toHaveValue('My careful title');
    await pr.getByRole('button', { name: 'Close' }).click();
    rmSync(join(worktree, 'wip.txt'));
    await page.getByRole('button', { name: 'Refresh' }).click();
    await expect(page.getByTestId('git-status')).not.toContainText('uncommitted');

    await page.getByRole('button', { name: 'Merge…' }).click();
    const composer = page.getByRole('dialog', { name: 'Merge into the base branch' });
    await expect(composer.getByLabel('Commit message')).toHaveValue('Merge me');
    expect(git(repo, 'rev-parse', 'main')).toBe(before); // nothing yet
    await composer.getByLabel('Strategy').selectOption('merge');
    await composer.getByLabel('Commit message').fill('Merge the work');
    await composer.getByRole('button', { name: 'Merge' }).click();
    await expect(composer).toBeHidden();
    const note = page.getByTestId('ship-note');
    await expect(note).toHaveText('Merged into main.');
    await expect(note).toHaveAttribute('data-ok', 'yes');
    expect(git(repo, 'log', '-1', '--format=%s%n%P', 'main').split('\n')[0]).toBe('Merge the work');
    expect(git(repo, 'log', '-1', '--format=%P', 'main').split(' ')).toHaveLength(2); // a merge commit
    // The task shows "merged", on its Changes tab and on its card, until its branch moves on.
    await expect(page.getByTestId('merged')).toBeVisible();
    await openBoard(page, kandev);
    const card = page.locator('[data-task-id="' + task.id + '"]');
    await expect(card.getByTestId('card-git')).toContainText('merged');
    await expect(card.getByTestId('card-git')).toHaveAttribute('aria-label', /merged/);
  } finally {
    removeRepo(repo);
  }
});
