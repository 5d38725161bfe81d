// Board: create a task and watch the reply stream in, follow-up, drag and drop, keyboard
// moves, search, archive, a second tab seeing changes live; screenshots of board and task.
import { expect, openBoard, screenshot, send, test, transcript } from './kandev';

test('create a task, watch the reply stream in, send a follow-up', async ({ page, kandev }) => {
  await openBoard(page, kandev);
  await page.getByRole('button', { name: 'New task' }).click();
  const dialog = page.getByRole('dialog', { name: 'New task' });
  await dialog.getByLabel('Title').fill('Write the release notes');
  await dialog.getByLabel(/Description/).fill('Summarize what changed');
  await expect(dialog.getByLabel('Start the agent now')).toBeChecked();
  await dialog.getByRole('button', { name: 'Create task' }).click();
  await expect(dialog).toBeHidden();

  const card = page.locator('.card', { hasText: 'Write the release notes' });
  await expect(card).toBeVisible();
  const column = page.locator('section.column', { has: card });
  // the start step; when the turn completes the Kanban board moves it on to Review
  await expect(column).toHaveAttribute('data-step-name', /In Progress|Review/);
  await expect(column.getByTestId('column-count')).toHaveText('1');
  // the card's badge follows the primary session live
  await expect(card.locator('.badge')).toHaveAttribute('data-state', /IN_PROGRESS|WAITING_FOR_INPUT/);
  await screenshot(page, 'board');

  await card.click();
  await expect(page).toHaveURL(/\/tasks\//);
  const log = transcript(page);
  await expect(log.locator('[data-kind="user"]').first()).toContainText('Write the release notes');
  await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Write the release notes');
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');

  await send(page, 'And mention the **fixes**');
  const reply = log.locator('[data-kind="agent"]').nth(1);
  await expect(reply).toHaveText('echo: And mention the fixes');
  await expect(reply.locator('strong')).toHaveText('fixes'); // markdown
  await expect(log.locator('[data-kind="user"]')).toHaveCount(2);

  // streamed chunks grow one message in place while the turn runs
  await send(page, '#!mock\nsay Streaming\nsleep 700\nsay , in place');
  const streamed = log.locator('[data-kind="agent"]').nth(2);
  await expect(streamed).toHaveText('Streaming');
  await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
  await expect(streamed).toHaveText('Streaming, in place');
  await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  await screenshot(page, 'task');
});

test('drag and drop moves and reorders cards; keyboard moves too', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  const review = steps.find((s) => s.name === 'Review')!;
  for (const title of ['Alpha', 'Bravo', 'Charlie']) {
    await kandev.createTask(title, { step_id: backlog.id });
  }
  await openBoard(page, kandev);
  const col = (name: string) => page.locator(`section.column[data-step-name="${name}"]`);
  await expect(col('Backlog').locator('.card')).toHaveText([/Alpha/, /Bravo/, /Charlie/]);

  // between columns
  await page.locator('.card', { hasText: 'Alpha' }).dragTo(col('Review').locator('.column-body'));
  await expect(col('Review').locator('.card')).toHaveText([/Alpha/]);
  await expect(col('Backlog').getByTestId('column-count')).toHaveText('2');
  // within a column: Charlie above Bravo
  await page
    .locator('.card', { hasText: 'Charlie' })
    .dragTo(page.locator('.card', { hasText: 'Bravo' }), { targetPosition: { x: 20, y: 5 } });
  await expect(col('Backlog').locator('.card')).toHaveText([/Charlie/, /Bravo/]);

  // the server agrees
  await expect
    .poll(async () => {
      const { tasks } = await kandev.api('task.list', { workflow_id: (await kandev.board()).workflowId });
      return tasks
        .filter((t: any) => t.step_id === backlog.id)
        .sort((a: any, b: any) => a.position - b.position)
        .map((t: any) => t.title);
    })
    .toEqual(['Charlie', 'Bravo']);
  const alpha = (await kandev.api('task.list', { workflow_id: (await kandev.board()).workflowId })).tasks.find(
    (t: any) => t.title === 'Alpha',
  );
  expect(alpha.step_id).toBe(review.id);

  // keyboard: Alt+ArrowDown reorders, ] moves to the next step, focus stays on the card
  const charlie = page.locator('.card', { hasText: 'Charlie' });
  await charlie.focus();
  await page.keyboard.press('Alt+ArrowDown');
  await expect(col('Backlog').locator('.card')).toHaveText([/Bravo/, /Charlie/]);
  await expect(charlie).toBeFocused();
  // ] and [ move a card to the next / previous step (Review has no automation)
  const alphaCard = page.locator('.card', { hasText: 'Alpha' });
  await alphaCard.focus();
  await page.keyboard.press(']');
  await expect(col('Done').locator('.card')).toHaveText([/Alpha/]);
  await expect(page.locator('.card', { hasText: 'Alpha' })).toBeFocused();
  await page.keyboard.press('Alt+ArrowLeft');
  await expect(col('Review').locator('.card')).toHaveText([/Alpha/]);
  await expect(col('Done').getByTestId('column-count')).toHaveText('0');
});

test('search filters, archive removes, a second tab sees it all live', async ({ page, context, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')!;
  await kandev.createTask('Fix the login bug', { step_id: backlog.id });
  await kandev.createTask('Write docs', { step_id: backlog.id, description: 'login page docs' });
  await kandev.createTask('Refactor store', { step_id: backlog.id });
  await openBoard(page, kandev);
  const other = await context.newPage();
  await openBoard(other, kandev);
  await page.bringToFront(); // background tabs get throttled animation frames

  await page.getByRole('searchbox', { name: 'Search tasks' }).fill('login');
  await expect(page.locator('.card')).toHaveCount(2);
  await page.getByRole('searchbox', { name: 'Search tasks' }).fill('');
  await expect(page.locator('.card')).toHaveCount(3);

  // a task created over the API shows up in both tabs without a reload
  await kandev.createTask('Created elsewhere', { step_id: backlog.id });
  await expect(page.locator('.card', { hasText: 'Created elsewhere' })).toBeVisible();
  await expect(other.locator('.card', { hasText: 'Created elsewhere' })).toBeVisible();

  // archive in one tab, gone in the other
  await page.locator('.card', { hasText: 'Refactor store' }).hover();
  await page.getByRole('button', { name: 'Archive Refactor store' }).click();
  await expect(page.locator('.card', { hasText: 'Refactor store' })).toHaveCount(0);
  await expect(other.locator('.card', { hasText: 'Refactor store' })).toHaveCount(0);

  // a move in one tab shows in the other
  await page
    .locator('.card', { hasText: 'Write docs' })
    .dragTo(page.locator('section.column[data-step-name="Done"] .column-body'));
  await expect(other.locator('section.column[data-step-name="Done"] .card')).toHaveText([/Write docs/]);
});

test('i14: a column says it is reading its tasks until the board answers, then counts them', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  await kandev.createTask('Counted once read', { step_id: steps.find((s) => s.name === 'Backlog')!.id });
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route('**/api/v1/task.list', async (route) => {
    await held;
    await route.continue();
  });
  await page.goto(kandev.url + '/');
  const backlog = page.locator('section.column[data-step-name="Backlog"]');
  await expect(backlog).toContainText('Reading the tasks…');
  await expect(backlog.getByTestId('column-count')).toHaveText('…');
  await expect(page.getByText('No tasks', { exact: true })).toHaveCount(0);

  release();
  await expect(backlog.locator('.card', { hasText: 'Counted once read' })).toBeVisible();
  await expect(backlog.getByTestId('column-count')).toHaveText('1');
  await expect(page.locator('section.column[data-step-name="Done"]')).toContainText('No tasks');
});
