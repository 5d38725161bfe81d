// Issue 50 (the secret store), the web side, as the owner of a server without accounts:
// Settings › Secrets adds a workspace secret, a server one and a repository one, replaces a
// value and removes a secret, and rotates the key; a value typed there is never in the page
// nor in any answer or live frame the page gets, before or after a reload. A profile's
// environment variable and an MCP server's header reference a secret by name and read back as
// references; an SSH executor allows secrets when added and in its row. With accounts, an
// admin of the workspace sets its secrets but only names the server's, and a member reads who
// can. A repository names the secrets its scripts get, in its settings. On a phone the
// section fits the screen. A webhook channel signs with a server secret named in its form.
import { execFileSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from '@playwright/test';
import { binary, expect, gitRepo, type Kandev, removeRepo, screenshot, test } from './kandev';

/** Everything the page has seen from the server: /api answers and the live socket's frames. */
function watch(page: Page): { seen: () => Promise<string[]> } {
  const answers: Promise<string>[] = [];
  const frames: string[] = [];
  page.on('response', (r) => {
    if (new URL(r.url()).pathname.startsWith('/api/')) answers.push(r.text().catch(() => ''));
  });
  page.on('websocket', (ws) => ws.on('framereceived', (f) => frames.push(String(f.payload))));
  return { seen: async () => [...(await Promise.all(answers)), ...frames] };
}

type EnvVar = { name: string; value: string; secret?: string };

test('i50 secrets: set, replace, reference from a profile, allow on an executor, rotate and remove, values never shown', async ({
  page,
  kandev,
}) => {
  test.setTimeout(120_000);
  const { workspaceId } = await kandev.board();
  const dir = gitRepo({ 'README.md': '# widget\n' });
  removeRepo(dir);
  await kandev.api('repository.create', { workspace_id: workspaceId, local_path: dir, name: 'widget' });
  const { profile } = await kandev.api('agent.profile.create', { name: 'Keys', kind: 'mock' });
  const values = {
    first: `e2e-first-${randomUUID()}`,
    second: `e2e-second-${randomUUID()}`,
    server: `e2e-server-${randomUUID()}`,
    repository: `e2e-repository-${randomUUID()}`,
  };
  const watched = watch(page);
  /** Fails naming each value found in the page or in what it received. */
  const noValueShown = async () => {
    const texts = [await page.content(), ...(await watched.seen())];
    for (const value of Object.values(values)) expect(texts.filter((t) => t.includes(value))).toEqual([]);
  };

  await page.goto(`${kandev.url}/settings`);
  await page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Secrets' }).click();
  await expect(page.getByRole('heading', { name: 'Secrets', exact: true })).toBeVisible();
  await expect(page.getByText('secret.key', { exact: false }).first()).toBeVisible();
  const keyId = page.getByTestId('secret-key-id');
  await expect(keyId).not.toHaveText('…');
  const table = page.getByRole('table', { name: 'Secrets' });
  await expect(table).toContainText('No secrets yet');

  // A workspace secret: the value field is a password field and is cleared once saved.
  const form = page.getByRole('form', { name: 'Set a secret' });
  await expect(form.getByLabel('Scope')).toHaveValue('workspace');
  await form.getByLabel('Name').fill('E2E_TOKEN');
  await expect(form.getByLabel('Value')).toHaveAttribute('type', 'password');
  await form.getByLabel('Value').fill(values.first);
  await form.getByRole('button', { name: 'Save secret' }).click();
  await expect(form.getByLabel('Value')).toHaveValue('');
  await expect(form.getByLabel('Name')).toHaveValue('');
  const token = table.locator('tr[data-secret="E2E_TOKEN"]');
  await expect(token.getByTestId('secret-scope')).toHaveText('Workspace');
  await expect(token.getByTestId('secret-updated')).toContainText('updated ');
  await noValueShown();

  // After a reload: listed, the value nowhere.
  await page.reload();
  await expect(token.getByTestId('secret-scope')).toHaveText('Workspace');
  await noValueShown();

  // Replacing: the row's Replace fills the form, which says it replaces.
  await token.getByRole('button', { name: 'Replace E2E_TOKEN (Workspace)' }).click();
  await expect(form.getByLabel('Name')).toHaveValue('E2E_TOKEN');
  await expect(form.getByLabel('Value')).toBeFocused();
  await expect(form.getByTestId('secret-form-note')).toHaveText('E2E_TOKEN is set in the workspace scope: saving replaces its value.');
  await form.getByLabel('Value').fill(values.second);
  await form.getByRole('button', { name: 'Replace value' }).click();
  await expect(form.getByLabel('Value')).toHaveValue('');
  await expect(form.getByRole('button', { name: 'Save secret' })).toBeVisible();
  await expect(token).toHaveCount(1);

  // A server secret (the owner's) and a repository one, listed by scope: server first.
  await form.getByLabel('Scope').selectOption('server');
  await form.getByLabel('Name').fill('SERVER_TOKEN');
  await form.getByLabel('Value').fill(values.server);
  await form.getByRole('button', { name: 'Save secret' }).click();
  await expect(table.locator('tr[data-secret="SERVER_TOKEN"]').getByTestId('secret-scope')).toHaveText('Server');
  await form.getByLabel('Scope').selectOption({ label: 'Repository widget' });
  await form.getByLabel('Name').fill('REPO_TOKEN');
  await form.getByLabel('Value').fill(values.repository);
  await form.getByRole('button', { name: 'Save secret' }).click();
  await expect(table.locator('tr[data-secret="REPO_TOKEN"]').getByTestId('secret-scope')).toHaveText('Repository widget');
  await expect(table.locator('tr[data-secret]')).toHaveCount(3);
  expect(await table.locator('tr[data-secret]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-secret')))).toEqual([
    'SERVER_TOKEN',
    'E2E_TOKEN',
    'REPO_TOKEN',
  ]);
  const listed = await kandev.api('secret.list', { workspace_id: workspaceId });
  expect(listed.secrets.map((s: { name: string; scope: string }) => `${s.scope} ${s.name}`).sort()).toEqual([
    'repository REPO_TOKEN',
    'server SERVER_TOKEN',
    'workspace E2E_TOKEN',
  ]);

  // The key: rotated after a question, every secret re-sealed.
  const oldKey = (await keyId.textContent()) ?? '';
  await page.getByRole('button', { name: 'Rotate key' }).click();
  await page.getByRole('dialog', { name: 'Rotate the secret key?' }).getByRole('button', { name: 'Rotate key' }).click();
  await expect(page.getByTestId('secret-key-rotated')).toHaveText('Rotated: 3 secrets re-sealed with the new key.');
  await expect(keyId).not.toHaveText(oldKey);
  await expect(keyId).not.toHaveText('…');

  // A profile's variable references the secret (offered by name), next to a plain value; an
  // MCP server's header does too. Both read back as references.
  await page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Agent profiles' }).click();
  await page.getByRole('row', { name: /Keys/ }).getByRole('button', { name: 'Edit' }).click();
  const edit = page.getByRole('form', { name: 'Edit profile' });
  await edit.getByRole('button', { name: 'Add variable' }).click();
  const first = edit.getByRole('group', { name: 'Variable 1' });
  await first.getByLabel('Variable name').fill('TOKEN');
  await first.getByLabel('Source').selectOption('secret');
  await expect(page.locator('datalist#secret-names option[value="E2E_TOKEN"]')).toHaveCount(1);
  await expect(page.locator('datalist#secret-names option[value="SERVER_TOKEN"]')).toHaveCount(1);
  await first.getByLabel('Secret', { exact: true }).fill('E2E_TOKEN');
  await edit.getByRole('button', { name: 'Add variable' }).click();
  const second = edit.getByRole('group', { name: 'Variable 2' });
  await second.getByLabel('Variable name').fill('REGION');
  await second.getByLabel('Value').fill('eu');
  await edit.getByRole('button', { name: 'Add MCP server' }).click();
  const server = edit.getByRole('group', { name: 'MCP server 1' });
  await server.getByLabel('Server name').fill('docs');
  await server.getByLabel('Transport').selectOption('http');
  await server.getByLabel('URL', { exact: true }).fill('http://127.0.0.1:9/mcp');
  await server.getByRole('button', { name: 'Add header from a secret' }).click();
  await server.getByRole('group', { name: 'Secret reference 1' }).getByLabel('Header name').fill('Authorization');
  await server.getByRole('group', { name: 'Secret reference 1' }).getByLabel('Secret', { exact: true }).fill('SERVER_TOKEN');
  await first.scrollIntoViewIfNeeded();
  await screenshot(page, 'i50-profile-references');
  await edit.getByRole('button', { name: 'Save profile' }).click();
  await expect(edit).toBeHidden();
  const stored = async () =>
    (await kandev.api('agent.profile.list')).profiles.find((p: { id: string }) => p.id === profile.id) as {
      env: EnvVar[];
      mcp_servers: { headers?: EnvVar[] }[];
    };
  const expectedEnv = [
    { name: 'TOKEN', value: '', secret: 'E2E_TOKEN' },
    { name: 'REGION', value: '********' },
  ];
  expect((await stored()).env).toEqual(expectedEnv);
  expect((await stored()).mcp_servers[0]?.headers).toEqual([{ name: 'Authorization', value: '', secret: 'SERVER_TOKEN' }]);

  await page.reload();
  await page.getByRole('row', { name: /Keys/ }).getByRole('button', { name: 'Edit' }).click();
  const again = page.getByRole('form', { name: 'Edit profile' });
  const reference = again.getByRole('group', { name: 'Variable 1' });
  await expect(reference.getByLabel('Variable name')).toHaveValue('TOKEN');
  await expect(reference.getByLabel('Source')).toHaveValue('secret');
  await expect(reference.getByLabel('Secret', { exact: true })).toHaveValue('E2E_TOKEN');
  await expect(again.getByRole('group', { name: 'Variable 2' }).getByLabel('Source')).toHaveValue('value');
  await expect(again.getByRole('group', { name: 'Variable 2' }).getByLabel('Value')).toHaveValue('');
  const header = again.getByRole('group', { name: 'MCP server 1' }).getByRole('group', { name: 'Secret reference 1' });
  await expect(header.getByLabel('Header name')).toHaveValue('Authorization');
  await expect(header.getByLabel('Secret', { exact: true })).toHaveValue('SERVER_TOKEN');
  // Saved unchanged: the reference stays a reference, the value stays kept.
  await again.getByRole('button', { name: 'Save profile' }).click();
  await expect(again).toBeHidden();
  expect((await stored()).env).toEqual(expectedEnv);

  // An SSH executor allows secrets when added, and changes them in its row.
  const key = join(kandev.home, 'id_test');
  writeFileSync(key, 'not a key\n');
  await page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Executors' }).click();
  const add = page.getByRole('form', { name: 'Add executor' });
  await add.getByLabel(/^Name/).fill('build1');
  await add.getByLabel(/^Host/).fill('build1.example');
  await add.getByLabel(/^Port/).fill('22');
  await add.getByLabel(/^User/).fill('build');
  await add.getByLabel(/^Identity file/).fill(key);
  await add.getByLabel(/^Known hosts file/).fill(join(kandev.home, 'known_hosts'));
  await add.getByLabel(/^Remote home/).fill('/home/build/.kandev');
  await add.getByLabel(/^Allowed secrets/).fill('SERVER_TOKEN, E2E_TOKEN');
  await add.getByRole('button', { name: 'Add executor' }).click();
  await expect(add.getByLabel(/^Name/)).toHaveValue('');
  const row = page.getByRole('table', { name: 'Executors' }).getByRole('row', { name: /build1/ });
  await expect(row.getByTestId('allowed-secrets')).toHaveText('E2E_TOKEN, SERVER_TOKEN');
  await row.scrollIntoViewIfNeeded();
  await screenshot(page, 'i50-executor-allowed-secrets');
  await row.getByRole('button', { name: 'Change the allowed secrets of build1' }).click();
  await row.getByRole('form', { name: 'Allowed secrets of build1' }).getByLabel('Allowed secrets', { exact: true }).fill('E2E_TOKEN');
  await row.getByRole('button', { name: 'Save' }).click();
  await expect(row.getByTestId('allowed-secrets')).toHaveText('E2E_TOKEN');
  await page.reload();
  await expect(row.getByTestId('allowed-secrets')).toHaveText('E2E_TOKEN');
  expect((await kandev.api('executor.list')).executors.map((x: { allowed_secrets: string[] }) => x.allowed_secrets)).toEqual([
    ['E2E_TOKEN'],
  ]);

  // Removing asks first.
  await page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Secrets' }).click();
  await token.getByRole('button', { name: 'Remove E2E_TOKEN (Workspace)' }).click();
  await page.getByRole('dialog', { name: 'Remove the secret E2E_TOKEN?' }).getByRole('button', { name: 'Delete secret' }).click();
  await expect(token).toHaveCount(0);
  await expect(table.locator('tr[data-secret]')).toHaveCount(2);
  const left = await kandev.api('secret.list', { workspace_id: workspaceId });
  expect(left.secrets.map((s: { name: string }) => s.name).sort()).toEqual(['REPO_TOKEN', 'SERVER_TOKEN']);

  await screenshot(page, 'i50-secrets');
  await noValueShown();
  expect(kandev.logs()).not.toContain(values.second);
});

test('i50 script secrets: a repository names the secrets its scripts get, when added and when edited', async ({ page, kandev }) => {
  const { workspaceId } = await kandev.board();
  await kandev.api('secret.set', { workspace_id: workspaceId, name: 'E2E_TOKEN', value: 'e2e-value' });
  await kandev.api('secret.set', { name: 'NPM_TOKEN', value: 'npm-value' });
  const dir = gitRepo({ 'README.md': '# widget\n' });
  removeRepo(dir);
  const other = gitRepo({ 'README.md': '# gadget\n' });
  removeRepo(other);
  await kandev.api('repository.create', { workspace_id: workspaceId, local_path: dir, name: 'widget' });
  const stored = async (name: string) =>
    (await kandev.api('repository.list', { workspace_id: workspaceId })).repositories.find((r: { name: string }) => r.name === name)
      ?.script_secrets as string[] | undefined;
  expect(await stored('widget')).toEqual([]);

  await page.goto(`${kandev.url}/settings/repositories`);
  const widget = page.getByRole('table').getByRole('row', { name: /widget/ });
  await expect(widget).toBeVisible();
  // None yet: the row says nothing of them.
  await expect(widget.getByTestId('script-secrets')).toHaveCount(0);
  await page.getByRole('button', { name: 'Edit widget' }).click();
  const form = page.getByRole('form', { name: 'Edit repository widget' });
  const field = form.getByLabel(/^Script secrets/);
  await expect(form).toContainText('Set as environment variables of the same names for the setup, cleanup and dev scripts.');
  await expect(field).toHaveValue('');
  // The stored names are offered, the last typed one completed in place.
  await expect(form.locator('datalist option[value="E2E_TOKEN"]')).toHaveCount(1);
  await expect(form.locator('datalist option[value="NPM_TOKEN"]')).toHaveCount(1);
  await field.fill('NPM_TOKEN, ');
  await expect(form.locator('datalist option[value="NPM_TOKEN, E2E_TOKEN"]')).toHaveCount(1);
  await expect(form.locator('datalist option')).toHaveCount(1);
  // A name that is not one is refused in the form's words.
  await field.fill('NPM_TOKEN, BAD-NAME');
  await form.getByRole('button', { name: 'Save repository' }).click();
  await expect(form.getByRole('alert')).toContainText('may hold only letters, digits and _');
  await expect(form.getByRole('alert')).not.toContainText('script_secrets');
  await field.fill('NPM_TOKEN, E2E_TOKEN');
  await form.getByRole('button', { name: 'Save repository' }).click();
  await expect(form).toBeHidden();
  await expect(widget.getByTestId('script-secrets')).toHaveText('E2E_TOKEN, NPM_TOKEN');
  expect(await stored('widget')).toEqual(['E2E_TOKEN', 'NPM_TOKEN']);

  // After a reload: in the row and in the form.
  await page.reload();
  await expect(widget.getByTestId('script-secrets')).toHaveText('E2E_TOKEN, NPM_TOKEN');
  await page.getByRole('button', { name: 'Edit widget' }).click();
  await expect(form.getByLabel(/^Script secrets/)).toHaveValue('E2E_TOKEN, NPM_TOKEN');
  await screenshot(page, 'i50-repository-script-secrets');
  // Emptied: none stored, and the row says nothing of them again.
  await form.getByLabel(/^Script secrets/).fill('');
  await form.getByRole('button', { name: 'Save repository' }).click();
  await expect(form).toBeHidden();
  await expect(widget.getByTestId('script-secrets')).toHaveCount(0);
  expect(await stored('widget')).toEqual([]);

  // A repository added with script secrets.
  const add = page.getByRole('form', { name: 'Add repository' });
  await add.getByLabel(/^Local path/).fill(other);
  await add.getByLabel(/^Name/).fill('gadget');
  await add.getByLabel(/^Script secrets/).fill('E2E_TOKEN');
  await add.getByRole('button', { name: 'Add repository' }).click();
  await expect(add.getByLabel(/^Local path/)).toHaveValue('');
  await expect(add.getByLabel(/^Script secrets/)).toHaveValue('');
  const gadget = page.getByRole('table').getByRole('row', { name: /gadget/ });
  await expect(gadget.getByTestId('script-secrets')).toHaveText('E2E_TOKEN');
  expect(await stored('gadget')).toEqual(['E2E_TOKEN']);
  await page.reload();
  await expect(gadget.getByTestId('script-secrets')).toHaveText('E2E_TOKEN');
});

test.describe('webhook', () => {
  // The receiver listens on 127.0.0.1, which a server reaches only with the opt-in.
  test.use({ kandevFlags: ['--allow-private-notification-targets'] });

  test('i50 a webhook channel signs with a stored server secret named in its form', async ({ page, kandev }) => {
    const received: { body: string; signature: string | undefined }[] = [];
    const hook = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        received.push({ body, signature: req.headers['x-kandev-signature'] as string | undefined });
        res.statusCode = 204;
        res.end();
      });
    });
    await new Promise<void>((ok) => hook.listen(0, '127.0.0.1', ok));
    try {
      const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
      const value = `e2e-hook-${randomUUID()}`;
      await kandev.board();
      await page.goto(`${kandev.url}/settings/secrets`);
      const secrets = page.getByRole('form', { name: 'Set a secret' });
      await secrets.getByLabel('Scope').selectOption('server');
      await secrets.getByLabel('Name').fill('HOOK_KEY');
      await secrets.getByLabel('Value').fill(value);
      await secrets.getByRole('button', { name: 'Save secret' }).click();
      await expect(page.locator('tr[data-secret="HOOK_KEY"]').getByTestId('secret-scope')).toHaveText('Server');

      // The channel's form names it: the server's secrets are offered.
      await page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Notifications' }).click();
      const form = page.getByRole('form', { name: 'Add channel' });
      await form.getByLabel('URL').fill(url);
      await form.getByLabel('Sign with').selectOption('stored');
      await expect(form.getByLabel('Secret', { exact: true })).toHaveCount(0);
      await expect(form.locator('datalist option[value="HOOK_KEY"]')).toHaveCount(1);
      await form.getByLabel(/^Stored secret/).fill('HOOK_KEY');
      await form.getByRole('button', { name: 'Add channel' }).click();
      const row = page.getByRole('table', { name: 'Notification channels' }).locator('tbody tr[data-channel-id]');
      await expect(row.getByTestId('channel-signed')).toHaveText('with the stored secret HOOK_KEY');
      // The form starts over.
      await expect(form.getByLabel('Sign with')).toHaveValue('typed');
      await expect(form.getByLabel('URL')).toHaveValue('');

      await page.reload();
      await expect(row.getByTestId('channel-signed')).toHaveText('with the stored secret HOOK_KEY');
      const channels = (await kandev.api('notification.channel.list', {})).channels as {
        secret_name: string | null;
        has_secret: boolean;
      }[];
      expect(channels.map((c) => [c.secret_name, c.has_secret])).toEqual([['HOOK_KEY', true]]);

      // Its Test is signed with the stored value, which the page never saw.
      await row.getByRole('button', { name: 'Test' }).click();
      await expect(page.getByTestId('channel-test-result')).toContainText('Test delivered (204)');
      expect(received).toHaveLength(1);
      const expected = `sha256=${createHmac('sha256', value).update(received[0].body).digest('hex')}`;
      expect(received[0].signature).toBe(expected);
      expect(await page.content()).not.toContain(value);

      // The edit form shows the name; saved unchanged, it stays.
      await row.getByRole('button', { name: 'Edit' }).click();
      const edit = page.getByRole('form', { name: 'Edit channel' });
      await expect(edit.getByLabel('Sign with')).toHaveValue('stored');
      await expect(edit.getByLabel(/^Stored secret/)).toHaveValue('HOOK_KEY');
      await screenshot(page, 'i50-channel-stored-secret');
      await edit.getByRole('button', { name: 'Save channel' }).click();
      await expect(edit).toBeHidden();
      await expect(row.getByTestId('channel-signed')).toHaveText('with the stored secret HOOK_KEY');

      // Without the secret, a test fails saying where to add it.
      await kandev.api('secret.remove', { name: 'HOOK_KEY' });
      await row.getByRole('button', { name: 'Test' }).click();
      await expect(page.getByTestId('channel-test-result')).toContainText('Test failed');
      await expect(page.getByTestId('channel-test-result')).toContainText('Secrets');
      expect(received).toHaveLength(1);
    } finally {
      hook.close();
    }
  });
});

const PASSWORD = 'correct horse battery';

/** A new browser context signed in as the new user `name`, on `path`. */
async function signedIn(browser: Browser, kandev: Kandev, name: string, path: string): Promise<Page> {
  execFileSync(binary, ['user', 'add', name, '--home', kandev.home], { input: `${PASSWORD}\n` });
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${kandev.url}${path}`);
  await expect(page).toHaveURL(/\/login/);
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByTestId('user-name')).toHaveText(name);
  return page;
}

/** Calls `action` as the person signed in on `page`. */
async function callAs(page: Page, action: string, payload: object): Promise<void> {
  await page.evaluate(
    async ([action, payload]) => {
      const r = await fetch(`/api/v1/${action}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      if (!r.ok) throw new Error(`${action}: ${r.status} ${await r.text()}`);
    },
    [action, payload] as const,
  );
}

test('i50 roles: an admin sets the workspace’s secrets and only names the server’s; a member reads who can', async ({ browser, kandev }) => {
  const { workspaceId } = await kandev.board();
  // The first user is the owner.
  const owner = await signedIn(browser, kandev, 'owen', '/settings/secrets');
  await callAs(owner, 'secret.set', { name: 'SERVER_TOKEN', value: 'server-value' });
  await owner.reload();
  await expect(owner.locator('tr[data-secret="SERVER_TOKEN"]').getByRole('button', { name: 'Remove SERVER_TOKEN (Server)' })).toBeVisible();
  const adam = await signedIn(browser, kandev, 'adam', '/');
  const mike = await signedIn(browser, kandev, 'mike', '/');
  await callAs(owner, 'workspace.member.set', { workspace_id: workspaceId, user: 'adam', role: 'admin' });
  await callAs(owner, 'workspace.member.set', { workspace_id: workspaceId, user: 'mike', role: 'member' });

  await adam.goto(`${kandev.url}/settings/secrets`);
  const server = adam.locator('tr[data-secret="SERVER_TOKEN"]');
  await expect(server.getByTestId('secret-scope')).toHaveText('Server');
  await expect(server.getByRole('button')).toHaveCount(0);
  await expect(adam.getByRole('button', { name: 'Rotate key' })).toHaveCount(0);
  const form = adam.getByRole('form', { name: 'Set a secret' });
  await expect(form.getByLabel('Scope').locator('option[value="server"]')).toHaveCount(0);
  await form.getByLabel('Name').fill('TEAM_TOKEN');
  await form.getByLabel('Value').fill('team-value');
  await form.getByRole('button', { name: 'Save secret' }).click();
  await expect(adam.locator('tr[data-secret="TEAM_TOKEN"]').getByTestId('secret-scope')).toHaveText('Workspace');

  await mike.goto(`${kandev.url}/settings/secrets`);
  await expect(mike.getByTestId('role-note')).toHaveText("Secrets are set by admins of the workspace; the server's own by its owner.");
  await expect(mike.getByRole('table', { name: 'Secrets' })).toHaveCount(0);
  await expect(mike.getByRole('form', { name: 'Set a secret' })).toHaveCount(0);
  await expect(mike.getByRole('alert')).toHaveCount(0);
});

test.describe('phone', () => {
  test.use({ viewport: { width: 390, height: 844 }, hasTouch: true });

  test('i50 the Secrets section fits a phone screen', async ({ page, kandev }) => {
    const { workspaceId } = await kandev.board();
    await kandev.api('secret.set', { name: 'A_RATHER_LONG_SECRET_NAME_FOR_A_PHONE_SCREEN', value: 'phone-value' });
    await kandev.api('secret.set', { workspace_id: workspaceId, name: 'PHONE_TOKEN', value: 'phone-value' });
    await page.goto(`${kandev.url}/settings/secrets`);
    const remove = page.getByRole('button', { name: 'Remove PHONE_TOKEN (Workspace)' });
    await expect(remove).toBeVisible();
    const box = await remove.boundingBox();
    expect((box?.x ?? 999) + (box?.width ?? 0)).toBeLessThanOrEqual(390);
    await expect(page.getByRole('button', { name: 'Rotate key' })).toBeVisible();
    await expect(page.getByRole('form', { name: 'Set a secret' }).getByRole('button', { name: 'Save secret' })).toBeVisible();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(page, 'i50-secrets-phone');
  });
});
