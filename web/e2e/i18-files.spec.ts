// Issue 18 acceptance 5 (part): the task page's file tree opens a file of the working
// directory, read-only.
import { expect, test, transcript } from './kandev';

test('i18 a5: the file tree lists the working directory and opens a file', async ({ page, kandev }) => {
  const task = await kandev.createTask('Files', { start_agent: true });
  const sessions = await kandev.api('task.session.list', { task_id: task.id });
  const session = sessions.sessions[0].id;
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Files');
  await kandev.api('message.add', {
    session_id: session,
    content: '#!mock\nwrite src/notes.md # Notes\\nline two\nsay written',
  });
  await expect(transcript(page).locator('[data-kind="agent"]').nth(1)).toHaveText('written');
  await page.getByRole('tab', { name: 'Files' }).click();
  const tree = page.getByRole('navigation', { name: 'Files' });
  await expect(tree.getByText('src/')).toBeVisible();
  await tree.getByRole('button', { name: 'notes.md' }).click();
  const view = page.getByRole('region', { name: 'File src/notes.md' });
  await expect(view.locator('pre.file-content')).toHaveText('# Notes\nline two');
  // The tab is in the address: a reload comes back to it.
  await page.reload();
  await expect(page.getByRole('tab', { name: 'Files' })).toHaveAttribute('aria-selected', 'true');
});
