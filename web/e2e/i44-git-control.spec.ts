// Issue 44 item 4 (git control): in the Changes tab's Working tree, one hunk of a file is
// staged and committed alone, an untracked file is discarded, the rest is staged and the
// last commit amended; Commits lists the branch's commits and shows one's diff; while a turn
// runs, staging is refused with the reason.
import { expect, git, gitRepo, removeRepo, screenshot, send, test, transcript } from './kandev';

const LINES = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`);

test('i44: stage a hunk, commit it, discard, amend, read the commits; refused while a turn runs', async ({ page, kandev }) => {
  const repo = gitRepo({ 'long.txt': LINES.join('\n') + '\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Control', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Control');
    const changed = ['LINE 1', ...LINES.slice(1, 19), 'LINE 20'].join('\\n') + '\\n';
    await send(page, `#!mock\nwrite long.txt ${changed}\nwrite scratch.txt scratch\nsay edited`);
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('edited');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const worktree = sessions[0].cwd as string;

    await page.getByRole('tab', { name: 'Changes' }).click();
    await page.getByRole('tab', { name: 'Working tree' }).click();
    const tree = page.getByRole('region', { name: 'Working tree' });
    const note = page.getByTestId('git-note');
    await expect(tree.getByRole('heading', { name: /Unstaged/ })).toContainText('(2)');
    await tree.getByRole('button', { name: 'Stage hunk 2 of long.txt' }).click();
    await expect(note).toHaveText('Staged hunk 2 of long.txt.');
    await expect(tree.getByRole('heading', { name: /^Staged/ })).toContainText('(1)');
    await screenshot(page, 'i44-working-tree');
    await tree.getByLabel('Message').fill('bottom only');
    await tree.getByRole('button', { name: 'Commit staged' }).click();
    await expect(note).toContainText('bottom only');
    expect(git(worktree, 'show', '--format=', 'HEAD')).toContain('+LINE 20');
    expect(git(worktree, 'show', '--format=', 'HEAD')).not.toContain('+LINE 1\n');

    // Discard the untracked file (after a yes in a dialog), stage the rest, amend.
    await tree.getByRole('button', { name: 'Discard scratch.txt' }).click();
    await page.getByRole('dialog', { name: 'Discard these changes?' }).getByRole('button', { name: 'Discard' }).click();
    await expect(note).toHaveText('Discarded scratch.txt.');
    await tree.getByRole('button', { name: 'Stage long.txt' }).click();
    await expect(note).toHaveText('Staged long.txt.');
    await tree.getByLabel('Message').fill('both ends');
    await tree.getByRole('button', { name: 'Amend last commit' }).click();
    await expect(note).toContainText('Amended');
    expect(git(worktree, 'log', '--format=%s', 'main..HEAD')).toBe('both ends');
    expect(git(worktree, 'status', '--porcelain')).toBe('');

    // The branch's commits, and one commit's diff.
    await page.getByRole('tab', { name: 'Commits' }).click();
    const commits = page.getByRole('region', { name: 'Commits' });
    await expect(commits.locator('.commit-list li')).toHaveCount(1);
    await commits.getByRole('button', { name: /both ends/ }).click();
    const diff = commits.locator('.commit-diff');
    await expect(diff.locator('.dl-add .dl-text')).toHaveText(['+LINE 1', '+LINE 20']);

    // While a turn runs, staging is refused with the reason.
    await kandev.api('message.add', { session_id: sessions[0].id, content: '#!mock\nwrite late.txt late\nhang' });
    await expect.poll(async () => (await kandev.api('session.get', { id: sessions[0].id })).session.state).toBe('RUNNING');
    await expect.poll(async () => git(worktree, 'status', '--porcelain')).toContain('late.txt');
    await page.getByRole('tab', { name: 'Working tree' }).click();
    await tree.getByRole('button', { name: 'Stage late.txt' }).click();
    await expect(note).toContainText('a turn is running');
    await expect(note).toHaveAttribute('data-ok', 'no');
    await kandev.api('agent.cancel', { session_id: sessions[0].id });
  } finally {
    removeRepo(repo);
  }
});
