// Issue 18 acceptance 5 (part): a task is edited and deleted from its page.
import { expect, test } from './kandev';

test('i18 a5: edit a task’s title and description, then delete it', async ({ page, kandev }) => {
  const task = await kandev.createTask('Old title', { description: 'old words' });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Old title');
  await page.getByRole('button', { name: 'Edit task' }).click();
  const edit = page.getByRole('dialog', { name: 'Edit task' });
  await edit.getByLabel('Title').fill('New title');
  await edit.getByLabel('Description').fill('new words');
  await edit.getByRole('button', { name: 'Save' }).click();
  await expect(edit).toHaveCount(0);
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('New title');
  const saved = await kandev.api('task.get', { id: task.id });
  expect([saved.task.title, saved.task.description]).toEqual(['New title', 'new words']);
  // A refusal is shown in the dialog, which stays open.
  await page.getByRole('button', { name: 'Edit task' }).click();
  await edit.getByLabel('Title').fill('x'.repeat(501));
  await edit.getByRole('button', { name: 'Save' }).click();
  await expect(edit.getByRole('alert')).toContainText('title');
  await edit.getByRole('button', { name: 'Cancel' }).click();

  await page.getByRole('button', { name: 'Delete task' }).click();
  const confirm = page.getByRole('dialog', { name: 'Delete this task?' });
  await confirm.getByRole('button', { name: 'Delete task' }).click();
  await expect(page).toHaveURL(`${kandev.url}/`);
  await expect(page.getByText('Deleted “New title”')).toBeVisible();
  const gone = await fetch(`${kandev.url}/api/v1/task.get`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: task.id }),
  });
  expect(gone.status).toBe(404);
});
