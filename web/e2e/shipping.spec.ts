// Issue 16: shipping from the UI against real git (a bare `origin` on disk) and a fake forge
// on loopback: the base branch picker, git status on the Changes tab, a review comment round
// trip to the agent, and Create PR.
import { createServer, type IncomingMessage } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, forgeRemote, git, gitRepo, openBoard, removeRepo, send, test, transcript } from './kandev';

// The forge token is read from the variable the repository names; kandev inherits it.
const TOKEN_ENV = 'KANDEV_E2E_FORGE_TOKEN';
process.env[TOKEN_ENV] = 'e2e-forge-secret';

interface Seen {
  method: string;
  path: string;
  auth: string | undefined;
  body: Record<string, unknown>;
}

/** A fake GitHub: records requests, answers create PR like the real API. */
async function fakeForge(): Promise<{ url: string; seen: Seen[]; close: () => void }> {
  const seen: Seen[] = [];
  const read = (req: IncomingMessage) =>
    new Promise<string>((ok) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => ok(data));
    });
  const server = createServer(async (req, res) => {
    const text = await read(req);
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    seen.push({ method: req.method ?? '', path: req.url ?? '', auth: req.headers.authorization, body });
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && req.url === '/repos/acme/widget/pulls') {
      res.end(JSON.stringify({
        number: 12, html_url: 'http://forge.test/acme/widget/pull/12', state: 'open', merged: false,
        head: { ref: body.head, sha: 'abc' }, base: { ref: body.base },
      }));
    } else if (req.url?.startsWith('/repos/acme/widget/commits/')) {
      res.end(JSON.stringify({ state: 'pending', total_count: 1 }));
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ message: 'Not Found' }));
    }
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => server.close() };
}

test('ship a task: base branch picker, git status, review comment, Create PR', async ({ page, kandev }) => {
  const tmp = mkdtempSync(join(tmpdir(), 'kandev-e2e-ship-'));
  const forge = await fakeForge();
  try {
    const { origin, seed } = forgeRemote(tmp, { 'README.md': '# demo\n' });
    git(seed, 'checkout', '-q', '-b', 'feature');
    writeFileSync(join(seed, 'feature.txt'), 'feature work\n');
    git(seed, 'add', '.');
    git(seed, 'commit', '-q', '-m', 'feature');
    git(seed, 'push', '-q', 'origin', 'feature');
    git(tmp, 'clone', '-q', origin, 'clone');
    const clone = join(tmp, 'clone');

    const { workspaceId, workflowId } = await kandev.board();
    await kandev.api('repository.create', {
      workspace_id: workspaceId,
      local_path: clone,
      forge_api_base_url: forge.url,
      forge_token_env: TOKEN_ENV,
    });

    await openBoard(page, kandev);
    await page.getByRole('button', { name: 'New task' }).click();
    const dialog = page.getByRole('dialog', { name: 'New task' });
    await dialog.getByLabel('Title').fill('Ship the notes');
    await dialog.getByLabel('Repository').selectOption({ label: 'clone' });
    const base = dialog.getByLabel('Base branch');
    await expect(base.locator('option[value="origin/feature"]')).toHaveCount(1);
    await base.selectOption('origin/feature');
    await dialog.getByRole('button', { name: 'Create task' }).click();
    await expect(dialog).toBeHidden();

    const { tasks } = await kandev.api('task.list', { workflow_id: workflowId });
    const task = tasks.find((t: { title: string }) => t.title === 'Ship the notes');
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Ship the notes');
    await send(page, '#!mock\nwrite notes.txt hello from the agent\nsay wrote it');
    await expect(transcript(page).locator('[data-kind="agent"]').last()).toHaveText('wrote it');

    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.locator('.diff-file[data-path="feature.txt"]')).toHaveCount(0); // from the base
    // Side by side: the new file's line on the right, nothing on the left.
    await page.getByLabel('Side by side').check();
    const sbs = page.locator('.diff-file[data-path="notes.txt"]').getByRole('table', { name: 'Side-by-side diff' });
    await expect(sbs.locator('tr').first().locator('td')).toHaveCount(3);
    await expect(sbs.locator('td.dl-add')).toHaveText('hello from the agent');
    await page.getByLabel('Side by side').uncheck();
    await page.getByLabel('Commit message').fill('Add notes');
    await page.getByRole('button', { name: 'Commit all' }).click();
    await expect(page.getByRole('status').filter({ hasText: 'Committed' })).toBeVisible();
    const status = page.getByTestId('git-status');
    await expect(status).toContainText('origin/feature: 1 ahead, 0 behind');

    // A review comment round trip on the diff: a click on a line number opens it, it is
    // stored (it survives a reload) and sent to the agent.
    const notes = page.locator('.diff-file[data-path="notes.txt"]');
    await notes.getByRole('button', { name: 'Comment on new line 1' }).click();
    const draft = notes.getByRole('form', { name: 'New comment' });
    await draft.getByLabel('Comment on new line 1').fill('say hi instead');
    await draft.getByRole('button', { name: 'Comment' }).click();
    const thread = notes.getByRole('group', { name: 'Thread on notes.txt:1' });
    await expect(thread).toContainText('say hi instead');
    await page.reload();
    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(thread).toContainText('say hi instead'); // stored on the server
    await page.getByRole('button', { name: 'Send review to agent' }).click();
    await expect(page.getByTestId('review-note')).toHaveText('Sent 1 comment to the agent.');
    await expect(thread.locator('[data-sent="yes"]')).toHaveCount(1);

    // Create PR (issue 44 item 6): a composer first, prefilled from the task, with its base;
    // nothing is sent until it is submitted. Then pushed to origin and one create call.
    await page.getByRole('button', { name: 'Create PR…' }).click();
    const composer = page.getByRole('dialog', { name: 'Create pull request' });
    await expect(composer.getByLabel('Title')).toHaveValue('Ship the notes');
    await expect(composer.getByTestId('pr-base')).toContainText('origin/feature');
    expect(forge.seen.filter((s) => s.method === 'POST')).toHaveLength(0);
    await composer.getByLabel('Description').fill('Adds the notes the agent wrote.');
    await composer.getByLabel('Draft').check();
    await composer.getByRole('button', { name: 'Create pull request' }).click();
    await expect(composer).toBeHidden();
    await expect(page.getByTestId('ship-note')).toHaveText('Opened http://forge.test/acme/widget/pull/12.');
    await expect(page.getByTestId('ship-note')).toHaveAttribute('data-ok', 'yes');
    await expect(status).toContainText('PR #12 open');
    const creates = forge.seen.filter((s) => s.method === 'POST');
    expect(creates).toHaveLength(1);
    expect(creates[0]?.path).toBe('/repos/acme/widget/pulls');
    expect(creates[0]?.auth).toBe('Bearer e2e-forge-secret');
    expect(creates[0]?.body.base).toBe('feature');
    expect(creates[0]?.body.title).toBe('Ship the notes');
    expect(creates[0]?.body.body).toBe('Adds the notes the agent wrote.');
    expect(creates[0]?.body.draft).toBe(true);
    const branch = String(creates[0]?.body.head);
    expect(git(origin, 'rev-parse', `refs/heads/${branch}`)).toHaveLength(40);
  } finally {
    forge.close();
    removeRepo(tmp);
  }
});

test('a conflicting rebase lists the files and the agent is asked to resolve them', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': 'one\ntwo\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Clash', { repository_ids: [repository.id], start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Clash');
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    const worktree = sessions[0].cwd as string;
    writeFileSync(join(worktree, 'README.md'), 'one\ntask\n');
    git(worktree, 'commit', '-q', '-am', 'task edit');
    writeFileSync(join(repo, 'README.md'), 'one\nbase\n');
    git(repo, 'commit', '-q', '-am', 'base edit');
    const head = git(worktree, 'rev-parse', 'HEAD');

    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.getByTestId('git-status')).toContainText('conflicts: README.md');
    await page.getByRole('button', { name: 'Rebase' }).click();
    await expect(page.getByTestId('ship-note')).toContainText('Rebase refused');
    await expect(page.getByTestId('ship-note')).toHaveAttribute('data-ok', 'no');
    await expect(page.getByTestId('ship-note')).toContainText('[README.md]');
    expect(git(worktree, 'rev-parse', 'HEAD')).toBe(head);
    await page.getByRole('button', { name: 'Ask the agent to resolve' }).click();
    await expect(page.getByTestId('ship-note')).toHaveText('Asked the agent to resolve the conflicts.');
    const sent = await kandev.api('message.list', { session_id: sessions[0].id });
    const users = sent.messages.filter((m: { kind: string }) => m.kind === 'user');
    expect(users[users.length - 1].content).toContain('conflicts in: README.md');
  } finally {
    removeRepo(repo);
  }
});

test('git status on a card follows turns, commits and the base, and survives a reload', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': 'one\n' });
  try {
    const { workspaceId } = await kandev.board();
    const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo });
    const task = await kandev.createTask('Card status', { repository_ids: [repository.id] });

    await openBoard(page, kandev);
    const card = page.locator(`[data-task-id="${task.id}"]`);
    await expect(card).toBeVisible();
    await expect(card.getByTestId('card-git')).toHaveCount(0);

    // A turn that leaves a new file: once it ends the card shows it uncommitted.
    await kandev.api('session.launch', { task_id: task.id, prompt: '#!mock\nwrite notes.txt hello\nsay done' });
    const git_ = card.getByTestId('card-git');
    await expect(git_).toHaveAttribute('aria-label', 'Git: 1 uncommitted');
    await expect(git_).toContainText('±1');
    // A commit: one commit ahead of the base.
    await kandev.api('task.commit', { task_id: task.id, message: 'Add notes' });
    await expect(git_).toHaveAttribute('aria-label', 'Git: 1 commit ahead');
    await expect(git_).toContainText('↑1');
    // The base gets its own notes.txt: behind, and a conflict, computed on demand.
    writeFileSync(join(repo, 'notes.txt'), 'base\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '-q', '-m', 'base notes');
    await kandev.api('task.git_status', { task_id: task.id });
    await expect(git_).toHaveAttribute('aria-label', 'Git: 1 commit ahead, 1 behind, 1 conflicting');
    await expect(git_.locator('.git-conflicts')).toHaveText('conflict');

    // Read afresh, the board shows the status as last published.
    await page.reload();
    await expect(page.locator('.columns[data-loaded="true"]')).toBeVisible();
    await expect(card.getByTestId('card-git')).toHaveAttribute('aria-label', 'Git: 1 commit ahead, 1 behind, 1 conflicting');

    // The Changes tab reads the diff again when a turn ends, without Refresh.
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await page.getByRole('tab', { name: 'Changes' }).click();
    await expect(page.locator('.diff-file[data-path="notes.txt"]')).toHaveCount(1);
    const { sessions } = await kandev.api('task.session.list', { task_id: task.id });
    await kandev.api('message.add', { session_id: sessions[0].id, content: '#!mock\nwrite later.txt later\nsay ok' });
    await expect(page.locator('.diff-file[data-path="later.txt"]')).toHaveCount(1);
  } finally {
    removeRepo(repo);
  }
});
