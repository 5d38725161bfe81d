// Issue 15, acceptance 5: the board's search box and the global search (Ctrl+K) find a task by
// a word that appears only in its agent's messages (the server's full-text search).
import { expect, openBoard, test } from './kandev';

test('i15_a5 board search and global search find a task by a word only its agent wrote', async ({ page, kandev }) => {
  // The mock agent answers "echo: <prompt>": "echo" is in no title, description or prompt.
  // In Backlog, whose tasks do not start by themselves: only Alpha's agent runs.
  const backlog = (await kandev.board()).steps.find((s) => s.name === 'Backlog')?.id;
  const started = await kandev.createTask('Alpha lighthouse', { step_id: backlog, start_agent: true });
  await kandev.createTask('Beta harbour', { step_id: backlog });
  await expect
    .poll(async () => (await kandev.api('task.get', { id: started.id })).task.state, { timeout: 30_000 })
    .toBe('WAITING_FOR_INPUT');

  await openBoard(page, kandev);
  const cards = page.locator('[data-task-id]');
  await expect(cards).toHaveCount(2);
  await page.getByRole('searchbox', { name: 'Search tasks' }).fill('echo');
  await expect(cards).toHaveCount(1);
  await expect(cards.first()).toContainText('Alpha lighthouse');
  await page.getByRole('searchbox', { name: 'Search tasks' }).fill('');
  await expect(cards).toHaveCount(2);

  // Global search: the shortcut opens it, the hit shows the highlighted word and opens the task.
  await page.locator('body').click();
  await page.keyboard.press('Control+k');
  const box = page.getByRole('searchbox', { name: 'Search tasks and messages' });
  await expect(box).toBeFocused();
  await box.fill('echo');
  const hits = page.getByRole('listbox', { name: 'Search results' }).getByRole('option');
  await expect(hits).toHaveCount(1);
  await expect(hits.first()).toContainText('Alpha lighthouse');
  await expect(hits.first().locator('mark')).toHaveText(['echo']);
  await box.press('Enter');
  await expect(page).toHaveURL(new RegExp(`/tasks/${started.id}`));

  // A query FTS5 cannot parse is a validation error, never a server error.
  const res = await fetch(`${kandev.url}/api/v1/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ workspace_id: started.workspace_id, query: '"unterminated' }),
  });
  expect(res.status).toBe(422);
  expect((await res.json()).code).toBe('VALIDATION_ERROR');
});
