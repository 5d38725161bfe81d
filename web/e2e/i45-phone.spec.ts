// Issue 45 item 26 and acceptance 2: on a phone (390×844) the task page gives the chat at
// least half its height, and every control a task needs is in reach by touch: open a task,
// read and send chat, answer a permission and a question, queue, cancel, move the task a
// step, view the diff, comment on it and commit. The board's header is one row of tools.
import { expect, gitRepo, openBoard, removeRepo, send, test, transcript } from './kandev';

test.use({ viewport: { width: 390, height: 844 }, hasTouch: true });

const noSideScroll = async (page: import('@playwright/test').Page) =>
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);

test('i45 26: a phone reads half a page of chat and reaches every control of a task', async ({ page, kandev }) => {
  const repo = gitRepo({ 'notes.txt': 'one\ntwo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('On the go', { repository_ids: [repository.id], start_agent: true });
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const state = async () => (await kandev.api('session.get', { id: sessions[0].id })).session.state;
    await expect.poll(state).toBe('WAITING_FOR_INPUT');
    const { steps } = await kandev.board();
    const stepId = (await kandev.api('task.get', { id: task.id })).task.step_id;
    const stepName = steps.find((st) => st.id === stepId)!.name;
    await openBoard(page, kandev);
    // The board's tools are one row: search is not squeezed, New task floats.
    const search = page.getByLabel('Search tasks');
    expect((await search.boundingBox())!.width).toBeGreaterThan(120);
    const tools = await page.locator('.toolbar').boundingBox();
    expect(tools!.height).toBeLessThan(60);
    await page.getByRole('tablist', { name: 'Steps' }).getByRole('tab', { name: new RegExp(`^${stepName}`) }).tap();
    await page.locator('.card', { hasText: 'On the go' }).tap();

    // Half the page is the conversation.
    const log = transcript(page);
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: On the go');
    const height = await log.evaluate((el) => el.getBoundingClientRect().height);
    expect(height).toBeGreaterThanOrEqual(844 / 2);
    await noSideScroll(page);
    for (const tab of ['Changes', 'Files', 'Terminal']) {
      await expect(page.getByRole('tab', { name: tab })).toBeVisible();
    }

    await send(page, 'from the train');
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: from the train');

    // A permission, then a question.
    await send(page, '#!mock\nask_permission deploy\nsay allowed');
    await page.getByRole('button', { name: 'Allow once' }).tap();
    await expect(log.locator('[data-kind="agent"]').last()).toContainText('allowed');
    await send(page, '#!mock\nmcp kandev ask_user {"question":"Which?","options":["left","right"]}');
    await page.getByTestId('question-card').getByRole('button', { name: 'right' }).tap();
    await expect(log.locator('[data-kind="question"]')).toContainText('Answered: right');

    // Queue behind a running turn, then cancel it from the one-row session bar.
    await send(page, '#!mock\nsay busy\nhang');
    await expect(page.getByTestId('session-state')).toHaveText('RUNNING');
    await send(page, 'after the cancel');
    await expect(page.getByRole('region', { name: 'Queued messages' }).locator('.queue-item')).toHaveCount(1);
    await page.getByRole('button', { name: 'Cancel turn' }).tap();
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
    // A cancel holds the queue (rule 10); it is sent by hand.
    await page.getByRole('button', { name: 'Send next' }).tap();
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: after the cancel');

    // The rest of the session's controls are behind More….
    await page.getByRole('button', { name: 'More…' }).tap();
    await expect(page.getByRole('toolbar', { name: 'Session controls' }).getByRole('button', { name: 'Stop' })).toBeVisible();
    await page.getByRole('button', { name: 'Less' }).tap();

    // The agent changes a file; the diff, a comment on a line, and the commit.
    await send(page, '#!mock\nwrite notes.txt one\\nTWO\\nthree\\n\nsay wrote it');
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('wrote it');
    await page.getByRole('tab', { name: 'Changes' }).tap();
    const file = page.locator('.diff-file[data-path="notes.txt"]');
    await expect(file.locator('.dl-add').first()).toContainText('TWO');
    await file.getByRole('button', { name: 'Comment on new line 2', exact: true }).tap();
    await file.getByRole('form', { name: 'New comment' }).getByLabel('Comment on new line 2').fill('shout less');
    await file.getByRole('form', { name: 'New comment' }).getByRole('button', { name: 'Comment' }).tap();
    await expect(file.getByText('shout less')).toBeVisible();
    await noSideScroll(page);
    await page.getByLabel('Commit message').fill('Louder notes');
    await page.getByRole('button', { name: 'Commit all' }).tap();
    await expect(page.getByRole('status').filter({ hasText: 'Committed' })).toBeVisible();

    // Move the task a step, from its page.
    const step = page.getByTestId('task-step');
    const before = await step.textContent();
    await page.getByTestId('next-step').tap();
    await expect(step).not.toHaveText(before ?? '');
    // The task's own actions are one tap away.
    await page.getByRole('button', { name: 'Task actions' }).tap();
    await expect(page.getByRole('button', { name: 'Edit task' })).toBeVisible();
  } finally {
    removeRepo(repo);
  }
});
