// Issue 45, items 1–5: settings the API alone could set before, now in the web UI. Each test
// fills a form, saves, reloads the page to see it kept, and checks the server.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { binary, expect, gitRepo, type Kandev, openBoard, removeRepo, test } from './kandev';

test('i45 1: a repository is edited in settings: scripts, copied files, branches, executor, forge and time limit', async ({ page, kandev }) => {
  const repo = gitRepo({ 'README.md': '# edit me\n' });
  removeRepo(repo);
  const { workspaceId } = await kandev.board();
  const { repository } = await kandev.api('repository.create', { workspace_id: workspaceId, local_path: repo, name: 'project' });
  const { executor } = await kandev.api('executor.create', { name: 'here', kind: 'local' });

  await page.goto(`${kandev.url}/settings/repositories`);
  await page.getByRole('button', { name: 'Edit project' }).click();
  const form = page.getByRole('form', { name: 'Edit repository project' });
  await expect(form.getByLabel(/^Base branch/)).toHaveValue('main');
  // A refusal reads in the form's words, not the API's field names.
  await form.getByLabel(/^Forge API URL/).fill('ftp://forge.example');
  await form.getByRole('button', { name: 'Save repository' }).click();
  await expect(form.getByRole('alert')).toContainText('Forge API URL must be an http:// or https:// URL');
  await expect(form.getByRole('alert')).not.toContainText('forge_api_base_url');

  await form.getByLabel(/^Name/).fill('renamed');
  await form.getByLabel(/^Base branch/).fill('develop');
  await form.getByLabel(/^Branch template/).fill('work/{task-slug}');
  await form.getByLabel(/^Setup script/).fill('npm ci');
  await form.getByLabel(/^Dev server command/).fill('npm run dev');
  await form.getByLabel(/^Cleanup script/).fill('rm -rf node_modules');
  await form.getByLabel(/^Files copied into each worktree/).fill('.env\nconfig/local.*');
  await form.getByLabel(/^Forge API URL/).fill('https://git.example.com/api/v4');
  await form.getByLabel(/^Token variable/).fill('MY_FORGE_TOKEN');
  await form.getByLabel(/^Script time limit/).fill('45');
  await form.getByLabel(/^Executor/).selectOption({ label: 'here (local)' });
  await form.getByRole('button', { name: 'Save repository' }).click();
  await expect(form).toBeHidden();
  await expect(page.getByRole('cell', { name: 'renamed', exact: true })).toBeVisible();

  await page.reload();
  await page.getByRole('button', { name: 'Edit renamed' }).click();
  const again = page.getByRole('form', { name: 'Edit repository renamed' });
  await expect(again.getByLabel(/^Base branch/)).toHaveValue('develop');
  await expect(again.getByLabel(/^Branch template/)).toHaveValue('work/{task-slug}');
  await expect(again.getByLabel(/^Setup script/)).toHaveValue('npm ci');
  await expect(again.getByLabel(/^Dev server command/)).toHaveValue('npm run dev');
  await expect(again.getByLabel(/^Cleanup script/)).toHaveValue('rm -rf node_modules');
  await expect(again.getByLabel(/^Files copied into each worktree/)).toHaveValue('.env\nconfig/local.*');
  await expect(again.getByLabel(/^Forge API URL/)).toHaveValue('https://git.example.com/api/v4');
  await expect(again.getByLabel(/^Token variable/)).toHaveValue('MY_FORGE_TOKEN');
  await expect(again.getByLabel(/^Script time limit/)).toHaveValue('45');
  await expect(again.getByLabel(/^Executor/)).toHaveValue(executor.id);

  const stored = (await kandev.api('repository.get', { id: repository.id })).repository;
  expect(stored).toMatchObject({
    name: 'renamed',
    default_branch: 'develop',
    branch_template: 'work/{task-slug}',
    setup_script: 'npm ci',
    dev_script: 'npm run dev',
    cleanup_script: 'rm -rf node_modules',
    copy_files: ['.env', 'config/local.*'],
    forge_api_base_url: 'https://git.example.com/api/v4',
    forge_token_env: 'MY_FORGE_TOKEN',
    script_timeout_s: 45 * 60,
  });
  const { executors } = await kandev.api('executor.list');
  expect(executors[0].repository_ids).toEqual([repository.id]);

  // Back to this machine.
  await again.getByLabel(/^Executor/).selectOption({ label: 'This machine' });
  await again.getByRole('button', { name: 'Save repository' }).click();
  await expect(again).toBeHidden();
  await expect.poll(async () => (await kandev.api('executor.list')).executors[0].repository_ids).toEqual([]);
});

/** A profile's env as stored (the API shows only masks): `NAME=value` lines. */
function storedEnv(kandev: Kandev, profileId: string): string[] {
  const out = execFileSync('sqlite3', ['-readonly', join(kandev.home, 'kandev.db'), `SELECT env FROM agent_profiles WHERE id = '${profileId}'`]);
  return (JSON.parse(out.toString()) as { name: string; value: string }[]).map((e) => `${e.name}=${e.value}`);
}

test('i45 2: a profile’s environment variables are added, edited and removed, and saved secrets are kept', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/profiles`);
  await page.getByRole('button', { name: 'Add profile' }).click();
  const form = page.getByRole('form', { name: 'New profile' });
  await form.getByLabel('Name', { exact: true }).fill('Keys');
  await form.getByRole('button', { name: 'Add variable' }).click();
  await form.getByRole('group', { name: 'Variable 1' }).getByLabel('Variable name').fill('API_KEY');
  await form.getByRole('group', { name: 'Variable 1' }).getByLabel('Value').fill('sk-first-secret');
  await form.getByRole('button', { name: 'Add variable' }).click();
  await form.getByRole('group', { name: 'Variable 2' }).getByLabel('Variable name').fill('REGION');
  await form.getByRole('group', { name: 'Variable 2' }).getByLabel('Value').fill('eu');
  await form.getByRole('button', { name: 'Save profile' }).click();
  await expect(form).toBeHidden();

  const keys = async () => (await kandev.api('agent.profile.list')).profiles.find((p: { name: string }) => p.name === 'Keys');
  const created = await keys();
  expect(created.env).toEqual([
    { name: 'API_KEY', value: '********' },
    { name: 'REGION', value: '********' },
  ]);
  expect(storedEnv(kandev, created.id)).toEqual(['API_KEY=sk-first-secret', 'REGION=eu']);

  // After a reload the names are there, the values not shown; one changed, one added.
  await page.reload();
  await page.getByRole('row', { name: /Keys/ }).getByRole('button', { name: 'Edit' }).click();
  const edit = page.getByRole('form', { name: 'Edit profile' });
  const first = edit.getByRole('group', { name: 'Variable 1' });
  await expect(first.getByLabel('Variable name')).toHaveValue('API_KEY');
  await expect(first.getByLabel('Value')).toHaveValue('');
  await expect(first.getByLabel('Value')).toHaveAttribute('placeholder', 'saved; type to replace');
  await edit.getByRole('group', { name: 'Variable 2' }).getByLabel('Value').fill('us');
  await edit.getByRole('button', { name: 'Add variable' }).click();
  await edit.getByRole('group', { name: 'Variable 3' }).getByLabel('Variable name').fill('2BAD');
  await edit.getByRole('button', { name: 'Save profile' }).click();
  await expect(edit.getByRole('alert')).toContainText('Environment variable “2BAD” is not a valid name');
  await edit.getByRole('group', { name: 'Variable 3' }).getByLabel('Variable name').fill('DEBUG');
  await edit.getByRole('group', { name: 'Variable 3' }).getByLabel('Value').fill('1');
  await edit.getByRole('button', { name: 'Save profile' }).click();
  await expect(edit).toBeHidden();
  expect(storedEnv(kandev, created.id)).toEqual(['API_KEY=sk-first-secret', 'REGION=us', 'DEBUG=1']);

  // Removed: gone from the server too.
  await page.reload();
  await page.getByRole('row', { name: /Keys/ }).getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('button', { name: 'Remove REGION' }).click();
  await page.getByRole('form', { name: 'Edit profile' }).getByRole('button', { name: 'Save profile' }).click();
  await expect(page.getByRole('form', { name: 'Edit profile' })).toBeHidden();
  expect((await keys()).env.map((e: { name: string }) => e.name)).toEqual(['API_KEY', 'DEBUG']);
  expect(storedEnv(kandev, created.id)).toEqual(['API_KEY=sk-first-secret', 'DEBUG=1']);
});

test('i45 3: an SSH executor whose identity file does not exist is refused, saying what to give', async ({ page, kandev }) => {
  const missing = join(kandev.home, 'no-such-key');
  await page.goto(`${kandev.url}/settings/executors`);
  const form = page.getByRole('form', { name: 'Add executor' });
  await form.getByLabel(/^Name/).fill('build1');
  await form.getByLabel(/^Host/).fill('build1.example');
  await form.getByLabel(/^Port/).fill('22');
  await form.getByLabel(/^User/).fill('build');
  await form.getByLabel(/^Identity file/).fill(missing);
  await form.getByLabel(/^Known hosts file/).fill(join(kandev.home, 'known_hosts'));
  await form.getByLabel(/^Remote home/).fill('/home/build/.kandev');
  await form.getByRole('button', { name: 'Add executor' }).click();
  await expect(form.getByRole('alert')).toHaveText(
    `identity file ${missing} does not exist; give the path of a private key on this machine`,
  );
  expect((await kandev.api('executor.list')).executors).toEqual([]);

  const key = join(kandev.home, 'id_test');
  writeFileSync(key, 'not a key\n');
  await form.getByLabel(/^Identity file/).fill(key);
  await form.getByRole('button', { name: 'Add executor' }).click();
  await expect(form.getByLabel(/^Name/)).toHaveValue('');
  await page.reload();
  await expect(page.getByRole('table', { name: 'Executors' }).locator('tbody tr')).toContainText('build@build1.example:22');
  const { executors } = await kandev.api('executor.list');
  expect(executors.map((x: { ssh: { identity_file: string } }) => x.ssh.identity_file)).toEqual([key]);
});

test('i45 4: subtasks and blockers are chosen in the New task dialog and changed in Edit task', async ({ page, kandev }) => {
  const { steps } = await kandev.board();
  const backlog = steps.find((s) => s.name === 'Backlog')?.id;
  const parent = await kandev.createTask('Parent', { step_id: backlog });
  const blockerA = await kandev.createTask('Blocker A', { step_id: backlog });
  const blockerB = await kandev.createTask('Blocker B', { step_id: backlog });

  await openBoard(page, kandev);
  await page.getByRole('button', { name: 'New task' }).click();
  const dialog = page.getByRole('dialog', { name: 'New task' });
  await dialog.getByLabel('Title').fill('Child');
  await dialog.getByLabel('Step').selectOption({ label: 'Backlog' });
  await dialog.getByLabel('Subtask of').selectOption({ label: 'Parent' });
  await dialog.getByLabel(/^Blocked by/).selectOption({ label: 'Blocker A' });
  await dialog.getByLabel(/^Blocked by/).selectOption({ label: 'Blocker B' });
  await expect(dialog.getByRole('list', { name: 'Chosen blockers' })).toContainText('Blocker A');
  await dialog.getByRole('button', { name: 'Create task' }).click();
  await expect(dialog).toBeHidden();

  const { workflowId } = await kandev.board();
  const { tasks } = await kandev.api('task.list', { workflow_id: workflowId });
  const child = tasks.find((t: { title: string }) => t.title === 'Child');
  expect(child.parent_id).toBe(parent.id);
  expect([...child.blocked_by].sort()).toEqual([blockerA.id, blockerB.id].sort());

  await page.goto(`${kandev.url}/tasks/${child.id}`);
  await page.reload();
  await expect(page.locator('.task-relations')).toContainText('Subtask of Parent');
  await expect(page.getByRole('region', { name: 'Blocked by' })).toContainText('Blocker A');

  await page.getByRole('button', { name: 'Edit task' }).click();
  const edit = page.getByRole('dialog', { name: 'Edit task' });
  await expect(edit.getByLabel('Subtask of')).toHaveValue(parent.id);
  await edit.getByLabel('Subtask of').selectOption({ label: 'None (a top-level task)' });
  await edit.getByRole('button', { name: 'Remove blocker Blocker A' }).click();
  await edit.getByRole('button', { name: 'Save' }).click();
  await expect(edit).toBeHidden();
  await page.reload();
  const blockedBy = page.getByRole('region', { name: 'Blocked by' });
  await expect(blockedBy).toContainText('Blocker B');
  await expect(blockedBy).not.toContainText('Blocker A');
  await expect(page.locator('.task-relations')).not.toContainText('Subtask of');
  const after = (await kandev.api('task.get', { id: child.id })).task;
  expect(after.parent_id).toBeNull();
  expect(after.blocked_by).toEqual([blockerB.id]);

  // A cycle is refused in the dialog's words: Blocker B blocked by Child, which it blocks.
  await page.goto(`${kandev.url}/tasks/${blockerB.id}`);
  await page.getByRole('button', { name: 'Edit task' }).click();
  const cycle = page.getByRole('dialog', { name: 'Edit task' });
  await cycle.getByLabel(/^Blocked by/).selectOption({ label: 'Child' });
  await cycle.getByRole('button', { name: 'Save' }).click();
  await expect(cycle.getByRole('alert')).toContainText(/those blockers would make a dependency cycle/i);
  await expect(cycle.getByRole('alert')).not.toContainText('blocked_by');
  expect((await kandev.api('task.get', { id: blockerB.id })).task.blocked_by).toEqual([]);
});

/** An action with a personal token (once a user exists, `kandev.api` has no credentials). */
async function apiAs(kandev: Kandev, secret: string, action: string, payload: object = {}): Promise<{ status: number; body: any }> {
  const response = await fetch(`${kandev.url}/api/v1/${action}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
    body: JSON.stringify(payload),
  });
  return { status: response.status, body: await response.json().catch(() => null) };
}

/** The status of a password login (`303` signed in, `401` refused). */
async function loginStatus(kandev: Kandev, name: string, password: string): Promise<number> {
  const response = await fetch(`${kandev.url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ name, password }).toString(),
    redirect: 'manual',
  });
  return response.status;
}

test('i45 5: a user’s own page makes and revokes personal tokens and changes the password, staying signed in', async ({
  page,
  browser,
  kandev,
}) => {
  execFileSync(binary, ['user', 'add', 'dana', '--home', kandev.home], { input: 'correct horse battery\n' });
  const signIn = async (p: typeof page) => {
    await p.goto(kandev.url);
    await p.getByLabel('Name').fill('dana');
    await p.getByLabel('Password').fill('correct horse battery');
    await p.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect(p.getByTestId('connection')).toHaveText('Live');
  };
  await signIn(page);
  await page.getByTestId('user-name').click();
  await expect(page).toHaveURL(`${kandev.url}/account`);
  await expect(page.getByTestId('account-name')).toHaveText('dana');

  // Tokens: the secret is shown once, with a way to copy it.
  const newToken = page.getByRole('form', { name: 'New token' });
  await newToken.getByLabel(/^Label/).fill('ci');
  await newToken.getByRole('button', { name: 'Create token' }).click();
  const secret = await page.getByRole('textbox', { name: 'Secret of the new token' }).inputValue();
  expect(secret).toMatch(/^kdv_[0-9a-f]{64}$/);
  await expect(page.getByText('Copy it now: it is not shown again')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Copy' })).toBeVisible();
  await newToken.getByLabel(/^Label/).fill('old laptop');
  await newToken.getByRole('button', { name: 'Create token' }).click();
  await expect(page.getByRole('textbox', { name: 'Secret of the new token' })).not.toHaveValue(secret);
  const oldSecret = await page.getByRole('textbox', { name: 'Secret of the new token' }).inputValue();
  expect((await apiAs(kandev, oldSecret, 'user.me')).body.user.name).toBe('dana');

  await page.reload();
  const tokens = page.getByRole('table', { name: 'Your tokens' });
  await expect(tokens.locator('tbody tr')).toHaveCount(2);
  await expect(page.getByRole('textbox', { name: 'Secret of the new token' })).toHaveCount(0);
  await tokens.getByRole('button', { name: 'Revoke old laptop' }).click();
  await expect(tokens.locator('tbody tr')).toHaveCount(1);
  await expect(tokens).toContainText('ci');
  expect((await apiAs(kandev, oldSecret, 'user.me')).status).toBe(401);
  const listed = await apiAs(kandev, secret, 'user.token.list');
  expect(listed.body.tokens.map((t: { name: string }) => t.name)).toEqual(['ci']);

  // Another browser signed in as dana: its login ends with the password change.
  const elsewhere = await browser.newContext();
  const other = await elsewhere.newPage();
  await signIn(other);

  const password = page.getByRole('form', { name: 'Change password' });
  await password.getByLabel('Current password').fill('not the password');
  await password.getByLabel(/^New password at least/).fill('a new horse battery');
  await password.getByLabel('New password again').fill('a new horse battery');
  await password.getByRole('button', { name: 'Change password' }).click();
  await expect(password.getByRole('alert')).toHaveText('the current password is wrong; nothing was changed');
  await password.getByLabel('Current password').fill('correct horse battery');
  await password.getByRole('button', { name: 'Change password' }).click();
  await expect(password.getByRole('status')).toContainText('Your password is changed');

  await expect(other).toHaveURL(/\/login/);
  await elsewhere.close();
  await expect(page).toHaveURL(`${kandev.url}/account`);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  await page.reload();
  await expect(page.getByTestId('account-name')).toHaveText('dana');
  expect(await loginStatus(kandev, 'dana', 'a new horse battery')).toBe(303);
  expect(await loginStatus(kandev, 'dana', 'correct horse battery')).toBe(401);
  expect((await apiAs(kandev, secret, 'user.me')).body.user.name).toBe('dana');
});
