// Issue 44 item 1 (threads on the diff, acceptance 2): in the side-by-side view a click on a
// line number of the base's side opens a thread there and a drag over three of the task's
// lines opens one on the range; the review reaches the agent with file, side and line; after
// the agent's turn the user's reply lands in the same thread and is sent on its own; a
// thread whose lines the agent changed says so; threads are edited, resolved and deleted.
import type { Page } from '@playwright/test';
import { expect, gitRepo, removeRepo, screenshot, send, test, transcript } from './kandev';

type Api = { api: (action: string, payload: object) => Promise<any> };

/** The session's messages of `kind` (`user`: the prompts as the agent got them), oldest first. */
async function said(kandev: Api, sessionId: string, kind: 'user' | 'agent'): Promise<string[]> {
  const { messages } = await kandev.api('message.list', { session_id: sessionId, limit: 1000 });
  return messages.filter((m: { kind: string }) => m.kind === kind).map((m: { content: string }) => m.content);
}
const echoed = 'echo: Please address these review comments:';

/** Drags over the line numbers from `from` to `to` (both on one side) of `file`. */
async function drag(page: Page, file: ReturnType<Page['locator']>, side: string, from: number, to: number) {
  await file.getByRole('button', { name: `Comment on ${side} line ${from}`, exact: true }).hover();
  await page.mouse.down();
  for (let n = from + 1; n <= to; n++) {
    await file.getByRole('button', { name: `Comment on ${side} line ${n}`, exact: true }).hover();
  }
  await page.mouse.up();
}

test('i44: threads on diff lines reach the agent, take a reply after its turn, and say when their lines changed', async ({
  page,
  kandev,
}) => {
  const repo = gitRepo({ 'code.txt': 'alpha\nbeta\ngamma\ndelta\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Review me', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Review me');
    await send(page, '#!mock\nwrite code.txt alpha\\nBETA\\ngamma\\ndelta\\nepsilon\\n\nsay wrote it');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote it');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const sessionId: string = sessions[0].id;

    await page.getByRole('tab', { name: 'Changes' }).click();
    await page.getByLabel('Side by side').check();
    const file = page.locator('.diff-file[data-path="code.txt"]');
    const sbs = file.getByRole('table', { name: 'Side-by-side diff' });
    await expect(sbs).toBeVisible();

    // A click on the base's line 2 (the removed `beta`) opens a thread on the old side.
    await sbs.getByRole('button', { name: 'Comment on old line 2', exact: true }).click();
    let draft = file.getByRole('form', { name: 'New comment' });
    await draft.getByLabel('Comment on old line 2').fill('why drop beta?');
    await draft.getByRole('button', { name: 'Comment' }).click();
    const removed = file.getByRole('group', { name: 'Thread on code.txt:2 (old)' });
    await expect(removed).toContainText('why drop beta?');

    // A drag over the task's lines 3 to 5 opens one thread on the range.
    await drag(page, sbs, 'new', 3, 5);
    draft = file.getByRole('form', { name: 'New comment' });
    await draft.getByLabel('Comment on new lines 3–5').fill('tidy these');
    await draft.getByRole('button', { name: 'Comment' }).click();
    const range = file.getByRole('group', { name: 'Thread on code.txt:3–5' });
    await expect(range).toContainText('tidy these');

    // The review reaches the agent as one prompt: file, side and line(s), the quoted lines.
    await page.getByRole('button', { name: 'Send review to agent' }).click();
    await expect(page.getByTestId('review-note')).toHaveText('Sent 2 comments to the agent.');
    await expect(removed.locator('[data-sent="yes"]')).toHaveCount(1);
    await expect.poll(async () => (await said(kandev, sessionId, 'user')).length).toBe(3);
    const review = (await said(kandev, sessionId, 'user'))[2]!;
    expect(review).toContain("code.txt:2 (old side: the base's version)\n> beta\nwhy drop beta?");
    expect(review).toContain('code.txt:3-5\n> gamma\n> delta\n> epsilon\ntidy these');
    // The agent's turn ends.
    await expect.poll(async () => (await said(kandev, sessionId, 'agent')).filter((t) => t === echoed).length).toBe(1);

    // After the turn, a reply lands in the same thread and is the only comment sent next.
    await removed.getByLabel('Reply').fill('still unclear: keep beta');
    await removed.getByRole('button', { name: 'Reply' }).click();
    await expect(removed.locator('.comment')).toHaveCount(2);
    await expect(removed.locator('.comment').last()).toHaveAttribute('data-sent', 'no');
    const { comments } = await kandev.api('review.comment.list', { task_id: task.id });
    const root = comments.find((c: { text: string }) => c.text === 'why drop beta?');
    const reply = comments.find((c: { text: string }) => c.text === 'still unclear: keep beta');
    expect(reply.thread_id).toBe(root.id);
    expect([reply.path, reply.line, reply.side]).toEqual(['code.txt', 2, 'old']);
    await page.getByRole('button', { name: 'Send review to agent' }).click();
    await expect(page.getByTestId('review-note')).toHaveText('Sent 1 comment to the agent.');
    await expect.poll(async () => (await said(kandev, sessionId, 'user')).length).toBe(4);
    const second = (await said(kandev, sessionId, 'user'))[3]!;
    expect(second).toContain('code.txt:2 (a reply in the thread on these lines) (old side');
    expect(second).toContain('still unclear: keep beta');
    expect(second).not.toContain('tidy these');
    await expect.poll(async () => (await said(kandev, sessionId, 'agent')).filter((t) => t === echoed).length).toBe(2);

    // The agent changes line 4: the range thread says its lines changed, the other does not.
    await kandev.api('message.add', {
      session_id: sessionId,
      content: '#!mock\nwrite code.txt alpha\\nBETA\\ngamma\\nDELTA\\nepsilon\\n\nsay changed delta',
    });
    await expect(range.getByTestId('lines-changed')).toBeVisible();
    await expect(removed.getByTestId('lines-changed')).toHaveCount(0);
    await expect(range.getByLabel('The lines as they were')).toHaveText('gamma\ndelta\nepsilon');
    await screenshot(page, 'i44-threads-side-by-side');

    // Resolve folds a thread and Reopen opens it; edit changes an unsent comment; delete
    // takes a thread away.
    await range.getByRole('button', { name: 'Resolve' }).click();
    await expect(range).toHaveAttribute('data-resolved', 'yes');
    await expect(range.locator('.comment')).toHaveCount(0);
    await expect(page.getByTestId('review-count')).toContainText('1 of 2 threads resolved');
    await range.getByRole('button', { name: 'Reopen' }).click();
    await expect(range).toHaveAttribute('data-resolved', 'no');
    await range.getByLabel('Reply').fill('one more');
    await range.getByRole('button', { name: 'Reply' }).click();
    const last = range.locator('.comment').last();
    await last.getByRole('button', { name: 'Edit' }).click();
    await range.getByLabel('Edit comment').fill('one more, edited');
    await range.getByRole('button', { name: 'Save' }).click();
    await expect(last.locator('.comment-text')).toHaveText('one more, edited');
    // A thread with replies is deleted only after a yes.
    await range.getByRole('button', { name: 'Delete thread' }).click();
    await page.getByRole('dialog', { name: 'Delete this thread?' }).getByRole('button', { name: 'Delete thread' }).click();
    await expect(range).toHaveCount(0);
    await expect(removed).toBeVisible();

    // The unified view shows both line numbers and the threads on their lines.
    await page.getByLabel('Side by side').uncheck();
    const unified = file.getByRole('table', { name: 'Unified diff' });
    await expect(unified.getByRole('button', { name: 'Comment on new line 5', exact: true })).toBeVisible();
    // A removed line has only its old number, and it comments on the old side.
    const beta = unified.locator('tr.dl-del').first();
    await expect(beta.getByRole('button')).toHaveAccessibleName('Comment on old line 2');
    await expect(removed).toContainText('still unclear: keep beta');
    await screenshot(page, 'i44-threads-unified');

    // A comment being written survives a switch to another view and back; Shift+click
    // extends it to a range; Ctrl+Enter sends it.
    await unified.getByRole('button', { name: 'Comment on new line 3', exact: true }).click();
    await file.getByRole('form', { name: 'New comment' }).getByLabel('Comment on new line 3').fill('keep me');
    await page.getByRole('tab', { name: 'Working tree' }).click();
    await page.getByRole('tab', { name: 'Review' }).click();
    const kept = file.getByRole('form', { name: 'New comment' });
    await expect(kept.getByLabel('Comment on new line 3')).toHaveValue('keep me');
    await unified.getByRole('button', { name: 'Comment on new line 5', exact: true }).click({ modifiers: ['Shift'] });
    await expect(kept.getByLabel('Comment on new lines 3–5')).toHaveValue('keep me');
    await kept.getByLabel('Comment on new lines 3–5').press('Control+Enter');
    await expect(file.getByRole('group', { name: 'Thread on code.txt:3–5' })).toContainText('keep me');
    await expect(file.getByRole('form', { name: 'New comment' })).toHaveCount(0);
  } finally {
    removeRepo(repo);
  }
});
