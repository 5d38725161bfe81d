// Issue 17: agents talk back to the board. An agent's `ask_user` shows up live as a card on
// the task page and the answer reaches the agent; a blocked task's card says so; the task
// page lists subtasks.
import { expect, send, test, transcript } from './kandev';

test('an ask_user card appears live and the answer reaches the agent', async ({ page, kandev }) => {
  const task = await kandev.createTask('Ask me', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  await send(page, '#!mock\nmcp kandev ask_user {"question":"Ship it?","options":["yes","not yet"]}');
  const card = page.getByTestId('question-card');
  await expect(card).toContainText('Ship it?');
  await card.getByRole('button', { name: 'yes' }).click();
  await expect(card).toHaveCount(0);
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toContainText(
    'mcp ask_user ok: {"answer":"yes"}',
  );
});

test('a card shows what blocks it and the task page lists subtasks', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!.id;
  const parent = await kandev.createTask('Parent work', { step_id: backlog });
  await kandev.createTask('First part', { step_id: backlog, parent_id: parent.id });
  await kandev.createTask('Waits for parent', { step_id: backlog, blocked_by: [parent.id] });
  await page.goto(kandev.url);
  const blocked = page.locator('.card', { hasText: 'Waits for parent' });
  await expect(blocked.getByTestId('blocked-by')).toHaveText('blocked by 1');
  await expect(blocked.getByTestId('blocked-by')).toHaveAttribute('title', 'Waits for: Parent work');
  const card = page.locator('.card', { hasText: 'Parent work' });
  await expect(card.getByTestId('subtask-count')).toHaveText('1 subtask');
  await page.goto(`${kandev.url}/tasks/${parent.id}`);
  await expect(page.getByTestId('subtasks')).toContainText('First part');
  await expect(page.getByTestId('subtasks')).toContainText('Backlog');
});

test('a profile gets an extra MCP server in the editor; its header stays a secret', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/profiles`);
  // The profile list first (the form's agent choices and the list the test reads later).
  await expect(page.getByRole('cell', { name: 'Mock', exact: true })).toBeVisible();
  await page.getByRole('button', { name: 'Add profile' }).click();
  const form = page.getByRole('form', { name: 'New profile' });
  await form.getByLabel('Name').fill('Mock with docs');
  await form.getByRole('button', { name: 'Add MCP server' }).click();
  const server = form.getByRole('group', { name: 'MCP server 1' });
  await server.getByLabel('Server name').fill('docs');
  await server.getByLabel('Transport').selectOption('http');
  await server.getByLabel('URL', { exact: true }).fill('http://127.0.0.1:9/mcp');
  await server.getByLabel(/Headers/).fill('Authorization: Bearer e2e-secret');
  await form.getByRole('button', { name: 'Save profile' }).click();
  const row = page.getByRole('row', { name: /Mock with docs/ });
  await expect(row.getByRole('cell', { name: 'docs', exact: true })).toBeVisible();

  // Shown masked when edited again; saving with the mask keeps the value.
  await row.getByRole('button', { name: 'Edit' }).click();
  const edit = page.getByRole('form', { name: 'Edit profile' });
  await expect(edit.getByLabel(/Headers/)).toHaveValue('Authorization: ********');
  await expect(page.getByText('e2e-secret')).toHaveCount(0);
  await edit.getByRole('button', { name: 'Save profile' }).click();
  await expect(edit).toHaveCount(0);

  // A bad server is refused with the server's message, naming the field in the form's words.
  await row.getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('form', { name: 'Edit profile' }).getByLabel('URL', { exact: true }).fill('not a url');
  await page.getByRole('form', { name: 'Edit profile' }).getByRole('button', { name: 'Save profile' }).click();
  const refusal = page.getByRole('form', { name: 'Edit profile' }).getByRole('alert');
  await expect(refusal).toContainText('MCP server 1 url');
  await expect(refusal).not.toContainText('mcp_servers');
  const profiles = await kandev.api<{ profiles: { name: string; mcp_servers: unknown }[] }>('agent.profile.list');
  const saved = profiles.profiles.find((p) => p.name === 'Mock with docs');
  expect(saved?.mcp_servers).toEqual([
    { name: 'docs', url: 'http://127.0.0.1:9/mcp', transport: 'http', headers: [{ name: 'Authorization', value: '********' }] },
  ]);
});
