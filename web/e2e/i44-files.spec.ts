// Issue 44 item 3 (the rest of it): the changed-files tree with counts (a click unfolds a
// folded file's diff), syntax highlighting and a monospace font in both views, and the
// unified/side-by-side choice kept when switching between the task's tabs.
import type { Locator } from '@playwright/test';
import { expect, gitRepo, removeRepo, send, test, transcript } from './kandev';

const fontOf = (l: Locator) => l.evaluate((e) => getComputedStyle(e).fontFamily);

test('i44: changed-files tree, highlighted monospace diffs, and the view choice kept', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# demo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Files', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Files');
    await send(page, '#!mock\nwrite src/lib.rs fn main() {}\\nfn other() {}\\n\nwrite notes.txt hello\nsay wrote them');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote them');

    await page.getByRole('tab', { name: 'Changes' }).click();
    const tree = page.getByRole('navigation', { name: 'Changed files' });
    await expect(tree.locator('.folder-name')).toHaveText(['src/']);
    await expect(tree.locator('li')).toHaveText([/notes\.txt\s*\+1\s*−0/, /lib\.rs\s*\+2\s*−0/]);

    // Highlighted (Rust keywords) and monospace in the unified view.
    const lib = page.locator('.diff-file[data-path="src/lib.rs"]');
    await expect(lib.locator('.hljs-keyword').first()).toHaveText('fn');
    expect(await fontOf(lib.locator('td.dl-text').first())).toContain('monospace');

    // A folded (viewed) file unfolds from the tree.
    await page.getByRole('checkbox', { name: 'Viewed src/lib.rs' }).check();
    await expect(lib).not.toHaveAttribute('open', '');
    await expect(tree.locator('li[data-viewed="yes"]')).toHaveText(/lib\.rs/);
    await tree.getByRole('button', { name: /lib\.rs/ }).click();
    await expect(lib).toHaveAttribute('open', '');

    // The side-by-side choice is kept across the task's tabs and a reload; highlighted and
    // monospace there too.
    await page.getByLabel('Side by side').check();
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.getByLabel('Side by side')).toBeChecked();
    await page.reload();
    await expect(page.getByLabel('Side by side')).toBeChecked();
    const sbs = page.locator('.diff-file[data-path="notes.txt"]').getByRole('table', { name: 'Side-by-side diff' });
    await expect(sbs.locator('td.dl-add')).toHaveText('hello');
    expect(await fontOf(sbs.locator('td.dl-add'))).toContain('monospace');
    await page.locator('.diff-file[data-path="src/lib.rs"] summary code').click(); // unfold
    await expect(page.locator('.diff-file[data-path="src/lib.rs"] table.sbs .hljs-keyword').first()).toHaveText('fn');
  } finally {
    removeRepo(repo);
  }
});
