// Issue 18 scope 4 (part): the create-task dialog takes several repositories, each with its
// base branch; a workspace is created (with its first board) and switched to from the header.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, openBoard, removeRepo, test } from './kandev';

function gitRepo(): string {
  const repo = mkdtempSync(join(tmpdir(), 'kandev-e2e-multi-'));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Kandev Test', '-c', 'user.email=test@kandev.invalid', ...args], { cwd: repo });
  git('init', '-q', '-b', 'main');
  writeFileSync(join(repo, 'README.md'), '# demo\n');
  git('add', '.');
  git('commit', '-q', '-m', 'initial');
  return repo;
}

test('i18: a task is created with two repositories from the dialog', async ({ page, kandev }) => {
  const repos = [gitRepo(), gitRepo()];
  try {
    const { workspaceId, workflowId } = await kandev.board();
    const ids: string[] = [];
    for (const [i, path] of repos.entries()) {
      const { repository } = await kandev.api('repository.create', {
        workspace_id: workspaceId,
        local_path: path,
        name: `repo-${i + 1}`,
      });
      ids.push(repository.id);
    }
    await openBoard(page, kandev);
    await page.getByRole('button', { name: 'New task' }).click();
    const dialog = page.getByRole('dialog', { name: 'New task' });
    await dialog.getByLabel('Title').fill('Two repos');
    // (A select inside its label: its accessible name ends with the chosen option.)
    await dialog.locator('select[name="repository"]').selectOption({ label: 'repo-1' });
    await dialog.getByRole('button', { name: 'Add another repository' }).click();
    const second = dialog.locator('select[name="repository-2"]');
    await expect(second.locator('option')).toHaveText(['Choose…', 'repo-2']); // repo-1 is taken
    await second.selectOption({ label: 'repo-2' });
    await expect(dialog.locator('select[name="base_branch-2"]')).toHaveValue('main');
    await expect(dialog.getByLabel('Base branch 2')).toHaveCount(1);
    await expect(dialog.getByRole('button', { name: 'Add another repository' })).toHaveCount(0); // none left
    await dialog.getByRole('button', { name: 'Create task' }).click();
    await expect(dialog).toBeHidden();
    const { tasks } = await kandev.api('task.list', { workflow_id: workflowId });
    const task = tasks.find((t: { title: string }) => t.title === 'Two repos');
    expect(task.repository_ids).toEqual(ids);
  } finally {
    for (const r of repos) removeRepo(r);
  }
});

test('i18: a workspace is created from the header and switched to, and back', async ({ page, kandev }) => {
  await openBoard(page, kandev);
  const picker = page.getByRole('combobox', { name: 'Workspace' });
  const first = await picker.inputValue();
  await picker.selectOption({ label: 'New workspace…' });
  const dialog = page.getByRole('dialog', { name: 'New workspace' });
  await dialog.getByLabel('Name').fill('Side project');
  await dialog.getByRole('button', { name: 'Create workspace' }).click();
  await expect(dialog).toBeHidden();
  await expect(picker.locator('option:checked')).toHaveText('Side project');
  await expect(page.locator('.board-title')).toHaveText('Kanban');
  await expect(page.locator('.columns[data-loaded="true"] .card')).toHaveCount(0);
  await picker.selectOption(first);
  await expect(picker).toHaveValue(first);
});
