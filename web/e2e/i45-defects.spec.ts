// Issue 45, the defects a new user hit: each test failed before its fix.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { binary, expect, gitRepo, openBoard, removeRepo, send, test, transcript } from './kandev';

test('i45 6: "Start the agent now" follows the chosen step, so a backlog task starts nothing', async ({ page, kandev }) => {
  await openBoard(page, kandev);
  await page.getByRole('button', { name: 'New task' }).click();
  const dialog = page.getByRole('dialog', { name: 'New task' });
  const start = dialog.getByLabel('Start the agent now');
  await dialog.getByLabel('Step').selectOption({ label: 'Backlog' });
  await expect(start).not.toBeChecked();
  // Ticked by hand, then another step: back to what that step does.
  await start.check();
  await dialog.getByLabel('Step').selectOption({ label: 'Review' });
  await expect(start).not.toBeChecked();
  await dialog.getByLabel('Step').selectOption({ label: 'Backlog' });
  await dialog.getByLabel('Title').fill('Later');
  await dialog.getByRole('button', { name: 'Create task' }).click();
  await expect(dialog).toBeHidden();
  await expect(page.locator('section.column[data-step-name="Backlog"] .card', { hasText: 'Later' })).toBeVisible();
  const { tasks } = await kandev.api('task.list', { workflow_id: (await kandev.board()).workflowId });
  const task = tasks.find((t: { title: string }) => t.title === 'Later');
  const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
  expect(sessions).toHaveLength(0);
});

test('i45 14: the New task dialog offers the only repository, then the one chosen last', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# only\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    await openBoard(page, kandev);
    await page.getByRole('button', { name: 'New task' }).click();
    const dialog = page.getByRole('dialog', { name: 'New task' });
    await expect(dialog.getByLabel('Repository')).toHaveValue(repository.id);
    // "None" chosen on purpose is kept for the next task.
    await dialog.getByLabel('Repository').selectOption({ label: 'None' });
    await dialog.getByLabel('Step').selectOption({ label: 'Backlog' });
    await dialog.getByLabel('Title').fill('Plain');
    await dialog.getByRole('button', { name: 'Create task' }).click();
    await expect(dialog).toBeHidden();
    await page.getByRole('button', { name: 'New task' }).click();
    await expect(dialog.getByLabel('Repository')).toHaveValue('');
  } finally {
    removeRepo(repo);
  }
});

test('i45 15: Reset context asks first, in the page', async ({ page, kandev }) => {
  const task = await kandev.createTask('Reset me', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Reset me');
  let native = false;
  page.on('dialog', (d) => {
    native = true;
    void d.dismiss();
  });
  await page.getByRole('button', { name: 'Reset context' }).click();
  const ask = page.getByRole('dialog', { name: "Reset the agent's context?" });
  await expect(ask).toBeVisible();
  await ask.getByRole('button', { name: 'Keep the context' }).click();
  await expect(ask).toBeHidden();
  await expect(transcript(page).locator('[data-kind="status"]').filter({ hasText: /context/i })).toHaveCount(0);
  expect(native).toBe(false);
});

test('i45 17: a task whose worktree has uncommitted work is not deleted, and the dialog says why in its own words', async ({
  page,
  kandev,
}) => {
  const repo = gitRepo({ 'README.md': '# dirty\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Dirty', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Dirty');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    writeFileSync(join(sessions[0].cwd, 'work.txt'), 'not committed\n');
    await page.getByRole('button', { name: 'Delete task' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete this task?' });
    await confirm.getByRole('button', { name: 'Delete task' }).click();
    const why = confirm.getByRole('alert');
    await expect(why).toContainText('uncommitted or untracked work, so nothing was deleted');
    await expect(why).not.toContainText('force');
    await confirm.getByRole('button', { name: 'Delete with its uncommitted work' }).click();
    await expect(page).toHaveURL(`${kandev.url}/`);
  } finally {
    removeRepo(repo);
  }
});

test('i45 17: the "Committed …" note goes once a rebase may have rewritten that commit', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# stale\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Stale', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Stale');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    writeFileSync(join(sessions[0].cwd, 'work.txt'), 'work\n');
    await page.getByRole('tab', { name: 'Changes' }).click();
    await page.getByLabel('Commit message').fill('the work');
    await page.getByRole('button', { name: 'Commit all' }).click();
    const committed = page.getByRole('status').filter({ hasText: 'Committed' });
    await expect(committed).toBeVisible();
    await page.getByRole('button', { name: 'Rebase' }).click();
    await expect(page.getByTestId('ship-note')).toHaveText('Rebased onto the base branch.');
    await expect(committed).toHaveCount(0);
  } finally {
    removeRepo(repo);
  }
});

test('i45 23: the workflow editor names triggers and actions as words, and blank steps have colours', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/workflows`);
  const create = page.getByRole('form', { name: 'New workflow' });
  await create.getByLabel('Name').fill('Plain board');
  await create.getByLabel('Template').selectOption('');
  await create.getByRole('button', { name: 'Create workflow' }).click();
  await expect(page.getByRole('combobox', { name: /^Workflow/ }).locator('option:checked')).toHaveText('Plain board');
  await page.getByPlaceholder('New step name').fill('Check');
  await page.getByRole('button', { name: 'Add step' }).click();
  const dots = page.locator('.step-editor summary .dot');
  await expect(dots).toHaveCount(4);
  const colours = await dots.evaluateAll((all) => all.map((d) => getComputedStyle(d).backgroundColor));
  expect(new Set(colours).size).toBe(4); // four columns, four colours
  const todo = page.locator('.step-editor', { has: page.locator('summary', { hasText: /^Todo/ }) });
  await todo.locator('summary').click();
  await expect(todo.locator('fieldset legend')).toContainText(['On enter', 'On turn start', 'On turn complete', 'On exit', 'On PR merged', 'On PR closed']);
});

test('i45 21: Archive says so on the card, and the Archived view links each task with its step and date', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s: { name: string }) => s.name === 'Backlog')!;
  const task = await kandev.createTask('Old idea', { step_id: backlog.id });
  await openBoard(page, kandev);
  const archive = page.getByRole('button', { name: 'Archive Old idea' });
  await expect(archive).toHaveText('Archive');
  expect(Number(await archive.evaluate((b) => getComputedStyle(b).opacity))).toBeGreaterThan(0.4); // seen without hovering
  await archive.click();
  await expect(page.locator('.card', { hasText: 'Old idea' })).toHaveCount(0);
  await page.getByRole('button', { name: 'Archived', exact: true }).click();
  const row = page.getByRole('region', { name: 'Archived tasks' }).locator(`li[data-task-id="${task.id}"]`);
  await expect(row).toContainText('Backlog');
  await expect(row).toContainText('archived');
  await row.getByRole('link', { name: 'Old idea' }).click();
  await expect(page).toHaveURL(new RegExp(`/tasks/${task.id}`));
});

test("i45 7: an agent's subtask works on its parent's repository and starts no agent unless asked", async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# sub\n' });
  try {
    const { workspaceId, workflowId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const parent = await kandev.createTask('Big job', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${parent.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Big job');
    await send(page, '#!mock\nmcp kandev create_task {"title":"Part one","parent_id":"current"}');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toContainText('mcp create_task ok');
    await expect(page.getByTestId('subtasks')).toContainText('Part one');
    await expect(page.getByTestId('subtasks')).toContainText('Backlog'); // In Progress would start an agent
    const { tasks } = await kandev.api('task.list', { workflow_id: workflowId });
    const sub = tasks.find((t: { title: string }) => t.title === 'Part one');
    expect(sub.repository_ids).toEqual([repository.id]);
    expect(sub.primary_session_id).toBeNull();
  } finally {
    removeRepo(repo);
  }
});

test('i45 10: while the agent waits on a permission or a question, the page says it waits for you', async ({ page, kandev }) => {
  const task = await kandev.createTask('Ask first', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Ask first');
  await send(page, '#!mock\nask_permission Edit README.md\nsay finished');
  const card = transcript(page).locator('[data-kind="permission_request"]');
  await expect(card).toHaveAttribute('data-status', 'pending');
  const session = page.locator('.session-bar');
  await expect(session.getByText('waiting for you')).toBeVisible();
  await expect(page.getByTestId('working')).toHaveText('The agent waits for your answer.');
  await card.getByRole('button', { name: 'Allow once' }).click();
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toContainText('finished');
  await expect(session.getByText('waiting for you')).toHaveCount(0);

  await send(page, '#!mock\nmcp kandev ask_user {"question":"Which one?","options":["a","b"]}');
  await expect(page.getByTestId('question-card')).toContainText('Which one?');
  await expect(page.getByTestId('working')).toHaveText('The agent waits for your answer.');
  await page.getByTestId('question-card').getByRole('button', { name: 'a' }).click();
  await expect(page.getByTestId('question-card')).toHaveCount(0);
});

test('i45 19: the Files tab numbers the lines, marks the changed files, and Refresh is a button', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# one\ntwo\nthree\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Read files', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Read files');
    await send(page, '#!mock\nwrite notes.txt new\nsay wrote');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote');
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    const tree = page.getByRole('navigation', { name: 'Files' });
    await expect(tree.locator('li', { hasText: 'notes.txt' }).getByTestId('change-mark')).toHaveText('U');
    await expect(tree.locator('li', { hasText: 'README.md' }).getByTestId('change-mark')).toHaveCount(0);
    await expect(tree.getByRole('button', { name: 'Refresh' })).not.toHaveClass(/link/);
    await tree.getByRole('button', { name: 'README.md' }).click();
    await expect(page.getByTestId('line-numbers')).toHaveText('1\n2\n3');
  } finally {
    removeRepo(repo);
  }
});

test('i45 20: global search shows one row per task, title hits first, fits its dialog, and Esc closes it', async ({ page, kandev }) => {
  const backlog = (await kandev.board()).steps.find((s) => s.name === 'Backlog')!.id;
  const chatty = await kandev.createTask('Chatty', { step_id: backlog, start_agent: true });
  await kandev.createTask('Zebra plan', { step_id: backlog });
  await page.goto(`${kandev.url}/tasks/${chatty.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Chatty');
  await send(page, 'zebra one');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: zebra one');
  await send(page, 'zebra two');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: zebra two');

  await page.locator('body').click();
  await page.keyboard.press('Control+k');
  const box = page.getByRole('searchbox', { name: 'Search tasks and messages' });
  await box.fill('zebra');
  const rows = page.getByRole('listbox', { name: 'Search results' }).getByRole('option');
  await expect(rows).toHaveCount(2);
  await expect(rows.first()).toContainText('Zebra plan');
  await expect(rows.nth(1)).toContainText('Chatty');
  await expect(rows.nth(1)).toContainText('more');
  const dialog = page.getByRole('dialog', { name: 'Search' });
  const fits = await dialog.evaluate((d) => d.scrollWidth <= d.clientWidth);
  expect(fits).toBe(true);
  await box.press('Escape');
  await expect(dialog).toBeHidden();
});

test('i45 16: a user message is markdown with its files in the same bubble, and @ without saved prompts says how to add one', async ({
  page,
  kandev,
}) => {
  const task = await kandev.createTask('Talk', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Talk');
  const uploaded = await fetch(`${kandev.url}/api/v1/attachment.upload?name=notes.txt`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain', 'x-kandev-upload': '1' },
    body: 'some notes\n',
  }).then((r) => r.json());
  const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
  await kandev.api('message.add', {
    session_id: sessions[0].id,
    content: 'please read **this** file',
    attachments: [uploaded.attachment],
  });
  const user = transcript(page).locator('[data-kind="user"]').last();
  await expect(user.locator('.bubble strong')).toHaveText('this');
  await expect(user.locator('.bubble .msg-attachments')).toContainText('notes.txt');

  const box = page.getByRole('textbox', { name: 'Message to the agent' });
  await box.fill('@');
  await expect(page.getByTestId('no-prompts')).toContainText('Settings → Prompts');
});

test('i45 8: an answered question stays in the transcript with the answer and who gave it', async ({ page, kandev }) => {
  const task = await kandev.createTask('Ask me', { start_agent: true });
  execFileSync(binary, ['user', 'add', 'dora', '--home', kandev.home], { input: 'correct horse battery\n' });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await page.getByLabel('Name').fill('dora');
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Ask me');
  await send(page, '#!mock\nmcp kandev ask_user {"question":"Which one?","options":["a","b"]}');
  await page.getByTestId('question-card').getByRole('button', { name: 'b' }).click();
  const answered = transcript(page).locator('[data-kind="question"]');
  await expect(answered).toContainText('Which one?');
  await expect(answered).toContainText('Answered: b · by dora');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toContainText('mcp ask_user ok');
  // Kept: a reload reads it from the transcript.
  await page.reload();
  await expect(transcript(page).locator('[data-kind="question"]')).toContainText('Answered: b · by dora');
});

test('i45 9: an agent crash is one state on the page, and the Session failed notification fires', async ({ page, kandev }) => {
  const task = await kandev.createTask('Crashes', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Crashes');
  await send(page, '#!mock\ncrash');
  await expect(page.getByTestId('needs-you')).toContainText('the session failed');
  const bar = page.locator('.session-bar');
  await expect(bar.locator('.badge[data-state]')).toHaveText('error');
  await expect(page.getByTestId('last-error')).toContainText('send a message to start it again');
  const failed = async () =>
    (await kandev.api('notification.list', {})).notifications.filter(
      (n: { kind: string; task_id: string }) => n.kind === 'session_failed' && n.task_id === task.id,
    ).length;
  await expect.poll(failed).toBe(1);
  // A new message starts the agent again: the error goes, and so does the need.
  await send(page, 'again');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: again');
  await expect(page.getByTestId('needs-you')).toHaveCount(0);
  await expect(bar.locator('.badge[data-state]')).toHaveText('waiting');
});

test('i45 11: after Stop the badge says stopped and Stop is off until the agent runs again', async ({ page, kandev }) => {
  const task = await kandev.createTask('Stop me', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Stop me');
  const bar = page.locator('.session-bar');
  const stop = bar.getByRole('button', { name: 'Stop', exact: true });
  await expect(bar.locator('.badge[data-state]')).toHaveText('waiting');
  await expect(stop).toBeEnabled();
  await stop.click();
  await expect(bar.locator('.badge[data-state]')).toHaveText('stopped');
  await expect(stop).toBeDisabled();
  await send(page, 'back again');
  await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('echo: back again');
  await expect(bar.locator('.badge[data-state]')).toHaveText('waiting');
  await expect(stop).toBeEnabled();
});

test('i45 12: a permission pending at a server restart is one card after it, and its answer reaches the agent', async ({
  page,
  kandev,
}) => {
  const task = await kandev.createTask('Ask across a restart', { start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  const log = transcript(page);
  await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Ask across a restart');
  await send(page, '#!mock\nsay before\nask_permission deploy\nsay after');
  const cards = log.locator('[data-kind="permission_request"]');
  await expect(cards).toHaveCount(1);
  await expect(cards.first()).toHaveAttribute('data-status', 'pending');
  const before = await cards.first().getAttribute('data-request-id');

  await kandev.restart('SIGKILL'); // the agent lives on in its runner and asks again
  await expect(page.getByTestId('connection')).toHaveText('Live', { timeout: 20_000 });
  await page.reload();
  await expect(log.locator('[data-kind="agent"]').filter({ hasText: 'before' })).toHaveCount(1);
  // The same card, taken over by the request asked again (a new request id).
  await expect(cards.first()).not.toHaveAttribute('data-request-id', before ?? '');
  await expect(cards).toHaveCount(1);
  await expect(cards.first()).toHaveAttribute('data-status', 'pending');
  await cards.first().getByRole('button', { name: 'Allow once' }).click();
  await expect(log.locator('[data-kind="agent"]').last()).toContainText('after');
  await expect(cards).toHaveCount(1);
  await expect(cards.first()).toHaveAttribute('data-status', 'approved');
});

test("i45 22: another workspace's tasks that need you show in the header and open from there", async ({ page, kandev }) => {
  const { workspace } = await kandev.api('workspace.create', { name: 'Side project' });
  const { workflow } = await kandev.api('workflow.create', { workspace_id: workspace.id, name: 'Side', template_id: 'kanban' });
  await openBoard(page, kandev);
  const elsewhere = page.getByTestId('needs-you-elsewhere');
  await expect(elsewhere).toHaveCount(0);
  const inProgress = workflow.steps.find((st: { name: string }) => st.name === 'In Progress').id;
  const { task } = await kandev.api('task.create', {
    workflow_id: workflow.id,
    title: 'Over there',
    step_id: inProgress,
    start_agent: true,
  });
  const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
  await expect.poll(async () => (await kandev.api('session.get', { id: sessions[0].id })).session.state).toBe('WAITING_FOR_INPUT');
  await kandev.api('message.add', { session_id: sessions[0].id, content: '#!mock\nask_permission deploy' });
  // Live: no reload.
  await expect(elsewhere).toHaveText('1 needs you elsewhere');
  await elsewhere.click();
  await page.getByRole('menuitem', { name: /Over there/ }).click();
  await expect(page).toHaveURL(new RegExp(`/tasks/${task.id}`));
  await expect(page.getByLabel('Workspace')).toHaveValue(workspace.id);
  // In its own workspace now: the header counts only the others.
  await expect(elsewhere).toHaveCount(0);
  await page.getByRole('button', { name: 'Allow once' }).click();
  await page.getByLabel('Workspace').selectOption({ label: 'Default' });
  await expect(elsewhere).toHaveCount(0);
});

test('i45 19: in a long highlighted file the line numbers stay beside their lines', async ({ page, kandev }) => {
  const long = Array.from({ length: 150 }, (_, i) => `line_${i + 1} = ${i + 1}`).join('\n') + '\n';
  const repo = gitRepo({ 'app.py': long });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Long file', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Long file');
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    await page.getByRole('navigation', { name: 'Files' }).getByRole('button', { name: 'app.py' }).click();
    const gutter = page.getByTestId('line-numbers');
    await expect(gutter).toContainText('150');
    const content = page.locator('pre.file-content');
    await expect(content).toContainText('line_150 = 150');
    // Both columns hold 150 lines: the same height means each number is beside its line.
    const heights = async () => [
      Math.round((await gutter.boundingBox())!.height),
      Math.round((await content.boundingBox())!.height),
    ];
    const [numbers, text] = await heights();
    expect(Math.abs(numbers - text)).toBeLessThanOrEqual(1);
  } finally {
    removeRepo(repo);
  }
});

test("i45 22: a task opened by its link while another workspace is shown switches to the task's workspace", async ({
  page,
  kandev,
}) => {
  const { workspace } = await kandev.api('workspace.create', { name: 'Elsewhere' });
  await kandev.api('workflow.create', { workspace_id: workspace.id, name: 'Other board', template_id: 'kanban' });
  const task = await kandev.createTask('Linked', {});
  await openBoard(page, kandev);
  await page.getByLabel('Workspace').selectOption({ label: 'Elsewhere' });
  await expect(page.getByLabel('Board')).toHaveValue(/.+/);
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  // Its steps are there to move it, and the header names its workspace.
  await expect(page.getByTestId('task-step')).toBeVisible();
  await expect(page.getByLabel('Move to step')).toBeVisible();
  await expect(page.getByLabel('Workspace')).toHaveValue((await kandev.board()).workspaceId);
  await page.getByRole('button', { name: 'Back to the board' }).click();
  await expect(page.locator('.card', { hasText: 'Linked' })).toBeVisible();
});
