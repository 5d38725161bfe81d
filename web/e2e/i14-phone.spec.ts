// Issue 14 on a phone (390×844): the task page moves a task between steps, and settings tables
// show every action on screen.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, openBoard, removeRepo, test } from './kandev';

test.use({ viewport: { width: 390, height: 844 }, hasTouch: true });

test('i14 d16 a phone moves a task between steps from its page', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  await kandev.createTask('Pocket task', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
  await openBoard(page, kandev);
  await page.locator('.card', { hasText: 'Pocket task' }).tap();
  await expect(page.getByTestId('task-step')).toHaveText('Backlog');
  await page.getByLabel('Move to step').selectOption({ label: 'Done' });
  await expect(page.getByTestId('task-step')).toHaveText('Done');
  await page.getByRole('button', { name: 'Back to the board' }).tap();
  const switcher = page.getByRole('tablist', { name: 'Steps' });
  await switcher.getByRole('tab', { name: /Done/ }).tap();
  await expect(page.locator('.card', { hasText: 'Pocket task' })).toBeVisible();
});

test('i14 d16 settings tables keep Remove and Delete on a phone screen', async ({ page, kandev }) => {
  const repo = mkdtempSync(join(tmpdir(), 'kandev-e2e-a-rather-long-repository-folder-name-'));
  try {
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=Kandev Test', '-c', 'user.email=test@kandev.invalid', ...args], { cwd: repo });
    git('init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'README.md'), '# demo\n');
    git('add', '.');
    git('commit', '-q', '-m', 'initial');
    const { workspaceId } = await kandev.board();
    await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    await page.goto(`${kandev.url}/settings/repositories`);
    const remove = page.getByRole('button', { name: 'Remove' });
    await expect(remove).toBeVisible();
    const box = await remove.boundingBox();
    expect((box?.x ?? 999) + (box?.width ?? 0)).toBeLessThanOrEqual(390);
    await page.goto(`${kandev.url}/settings/profiles`);
    const del = page.getByRole('button', { name: 'Delete' }).first();
    await expect(del).toBeVisible();
    const box2 = await del.boundingBox();
    expect((box2?.x ?? 999) + (box2?.width ?? 0)).toBeLessThanOrEqual(390);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  } finally {
    removeRepo(repo);
  }
});
