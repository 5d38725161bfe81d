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
