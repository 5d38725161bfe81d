// Issue 48: three attempts with different mock prompts, started from the task page, each
// write in their own worktree; the attempts view shows them side by side (one column on a
// phone), each one's diff; picking one leaves its branch on the task and removes the other
// two worktrees.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, gitRepo, removeRepo, screenshot, test } from './kandev';

const script = (file: string) => `#!mock\nwrite ${file} from ${file}\nterminal git add -A && git commit -qm ${file}\nsay done`;

test('i48: three attempts side by side, one picked', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': 'hello\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Race', { repository_ids: [repository.id] });
    await page.goto(`${kandev.url}/tasks/${task.id}`);

    await page.getByRole('button', { name: 'Start attempts' }).click();
    const start = page.getByRole('dialog', { name: 'Start attempts' });
    await start.getByRole('button', { name: 'Add an attempt' }).click();
    const messages = start.getByLabel('First message');
    await expect(messages).toHaveCount(3);
    for (const [i, file] of ['one.txt', 'two.txt', 'three.txt'].entries()) {
      await messages.nth(i).fill(script(file));
    }
    await start.getByRole('button', { name: 'Start 3 attempts' }).click();

    const view = page.getByRole('region', { name: 'Attempts side by side' });
    const cards = view.getByRole('article');
    await expect(cards).toHaveCount(3);
    for (const name of ['Attempt 1', 'Attempt 2', 'Attempt 3']) {
      await expect(view.getByRole('article', { name }).getByTestId('attempt-stats')).toHaveText(/^1 file changed \+1/);
    }
    const { attempts } = await kandev.api('task.attempt.list', { task_id: task.id });
    const worktrees = attempts.map((a: { worktree: string }) => a.worktree);
    expect(new Set(worktrees).size).toBe(3);
    for (const [i, file] of ['one.txt', 'two.txt', 'three.txt'].entries()) {
      expect(existsSync(join(worktrees[i], file))).toBe(true);
      expect(existsSync(join(worktrees[i], i === 0 ? 'two.txt' : 'one.txt'))).toBe(false);
    }
    await screenshot(page, 'i48-attempts');

    const second = view.getByRole('article', { name: 'Attempt 2' });
    await second.getByRole('button', { name: 'Show diff' }).click();
    const diff = page.getByRole('dialog', { name: 'Diff of Attempt 2' });
    await expect(diff.locator('.diff-file')).toHaveAttribute('data-path', 'two.txt');
    await diff.getByRole('button', { name: 'Close' }).click();

    // On a phone the cards stack in one column.
    await page.setViewportSize({ width: 390, height: 844 });
    const boxes = await Promise.all([0, 1, 2].map(async (i) => (await cards.nth(i).boundingBox())!));
    expect(boxes[0].x).toBe(boxes[1].x);
    expect(boxes[1].y).toBeGreaterThan(boxes[0].y);
    await screenshot(page, 'i48-attempts-phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    await second.getByRole('button', { name: 'Pick this one' }).click();
    await page.getByRole('dialog', { name: 'Pick Attempt 2?' }).getByRole('button', { name: 'Pick Attempt 2' }).click();
    await expect(page.getByText(`Attempt 2 picked: its branch ${attempts[1].branch} is the task's`)).toBeVisible();
    const changes = await kandev.api('task.changes', { task_id: task.id });
    expect(changes.files.map((f: { path: string }) => f.path)).toEqual(['two.txt']);
    expect(changes.worktrees[0].branch).toBe(attempts[1].branch);
    expect(existsSync(worktrees[0])).toBe(false);
    expect(existsSync(worktrees[2])).toBe(false);
    const picked = await kandev.api('task.get', { id: task.id });
    expect(picked.task.primary_session_id).toBe(attempts[1].session.id);
    await expect(page.getByRole('tab', { name: 'Attempts' })).toHaveCount(0);
  } finally {
    removeRepo(repo);
  }
});
