// Settings: profiles and installed agents, repositories, workflows from a template with step
// editing, and YAML export/import with its problems shown.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { expect, removeRepo, test } from './kandev';

test('profiles, repositories and workflows are managed from settings', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/profiles`);
  await expect(page.getByRole('cell', { name: 'Mock', exact: true })).toBeVisible();
  const kinds = page.getByTestId('agent-kinds');
  await expect(kinds.getByRole('row', { name: /mock/ })).toContainText('installed');
  await expect(kinds.getByRole('row', { name: /claude/ })).toContainText(/npm install/);

  await page.getByRole('button', { name: 'Add profile' }).click();
  const form = page.getByRole('form', { name: 'New profile' });
  await form.getByLabel('Name').fill('Mock, auto-approving');
  await form.getByLabel('Approve permission requests automatically').check();
  await form.getByRole('button', { name: 'Save profile' }).click();
  await expect(page.getByRole('cell', { name: 'Mock, auto-approving' })).toBeVisible();

  // repositories
  const repo = mkdtempSync(join(tmpdir(), 'kandev-e2e-settings-'));
  try {
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: repo });
    execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@t.invalid', 'commit', '-q', '--allow-empty', '-m', 'init'], { cwd: repo });
    await page.getByRole('link', { name: 'Repositories' }).click();
    const add = page.getByRole('form', { name: 'Add repository' });
    await add.getByLabel(/Local path/).fill(repo);
    await add.getByLabel('Name').fill('demo-repo');
    await add.getByRole('button', { name: 'Add repository' }).click();
    await expect(page.getByRole('cell', { name: 'demo-repo', exact: true })).toBeVisible();
    // The live list can show the row before the form hears its reply and empties itself;
    // typing before that would be wiped out.
    await expect(add.getByLabel(/Local path/)).toHaveValue('');
    await add.getByLabel(/Local path/).fill('/definitely/not/a/repo');
    await add.getByRole('button', { name: 'Add repository' }).click();
    await expect(add.getByRole('alert')).toBeVisible();
  } finally {
    removeRepo(repo);
  }

  // workflows: create from a template, rename a step, export, import a broken document
  await page.getByRole('link', { name: 'Workflows' }).click();
  const create = page.getByRole('form', { name: 'New workflow' });
  await create.getByLabel('Name').fill('Planned work');
  await create.getByLabel('Template').selectOption('plan-build');
  await create.getByRole('button', { name: 'Create workflow' }).click();
  await expect(page.getByRole('combobox', { name: /^Workflow/ }).locator('option:checked')).toHaveText('Planned work');
  await expect(page.locator('.step-editor summary', { hasText: 'Plan' }).first()).toBeVisible();
  const build = page.locator('.step-editor', { has: page.locator('summary', { hasText: /^Build/ }) });
  await build.locator('summary').click();
  await expect(build.locator('fieldset', { hasText: 'on enter' }).getByLabel('Action', { exact: true })).toHaveCount(2);
  await build.getByLabel('Name').fill('Build it');
  await build.getByRole('button', { name: 'Save step' }).click();
  await expect(page.locator('.step-editor summary', { hasText: 'Build it' })).toBeVisible();

  await page.getByRole('button', { name: /Export/ }).click();
  await expect(page.getByLabel('YAML')).toHaveValue(/kind: kandev-workflow[\s\S]*Build it/);
  await page.getByLabel('YAML').fill('version: 1\nkind: kandev-workflow\nworkflows:\n  - name: ""\n    steps: []\n');
  await page.getByRole('button', { name: 'Import' }).click();
  await expect(page.locator('ul.form-error li').first()).toContainText('workflows[0]');
});

/** Holds the answers to `action` until the returned function is called. */
async function hold(page: Page, action: string): Promise<() => void> {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route(`**/api/v1/${action}`, async (route) => {
    await held;
    await route.continue();
  });
  return release;
}

test('i14: the profile list says it is being read, and Add profile stays put when it arrives', async ({ page, kandev }) => {
  const release = await hold(page, 'agent.profile.list');
  await page.goto(`${kandev.url}/settings/profiles`);
  const list = page.getByRole('table', { name: 'Agent profiles' });
  await expect(list).toContainText('Reading the profiles…');
  // The top bar settled (workspaces read, connection live) before the button is measured.
  await expect(page.getByRole('combobox', { name: 'Workspace' })).toHaveValue(/.+/);
  await expect(page.getByTestId('connection')).toHaveText('Live');
  const add = page.getByRole('button', { name: 'Add profile' });
  const before = await add.boundingBox();

  release();
  await expect(list.getByRole('cell', { name: 'Mock', exact: true })).toBeVisible();
  await expect(list).not.toContainText('Reading the profiles…');
  expect(await add.boundingBox()).toEqual(before);

  // With none left, the list says so instead of showing an empty table.
  await list.getByRole('row', { name: /Mock/ }).getByRole('button', { name: 'Delete' }).click();
  await expect(list).toContainText('No profiles yet');
});

test('i14: executors and notification channels say they are being read before they say there are none', async ({ page, kandev }) => {
  const pages = [
    { action: 'executor.list', path: 'executors', reading: 'Reading the executors…', none: 'No executors yet.' },
    { action: 'notification.channel.list', path: 'notifications', reading: 'Reading the channels…', none: 'No channels yet.' },
  ];
  for (const { action, path, reading, none } of pages) {
    const release = await hold(page, action);
    await page.goto(`${kandev.url}/settings/${path}`);
    await expect(page.getByText(reading)).toBeVisible();
    await expect(page.getByText(none)).toHaveCount(0);
    release();
    await expect(page.getByText(none)).toBeVisible();
  }
});

test('i14: saved prompts and repositories say when there are none, and a failed read says it failed', async ({ page, kandev }) => {
  await page.goto(`${kandev.url}/settings/repositories`);
  await expect(page.getByText('No repositories yet: add one below by its local path.')).toBeVisible();

  await page.route('**/api/v1/prompt.list', (route) => route.abort('connectionrefused'));
  await page.goto(`${kandev.url}/settings/prompts`);
  await expect(page.getByRole('alert')).toBeVisible();
  await expect(page.getByText('Reading the saved prompts…')).toHaveCount(0);
  await expect(page.getByText('No saved prompts yet')).toHaveCount(0);

  await page.unroute('**/api/v1/prompt.list');
  await page.reload();
  await expect(page.getByText('No saved prompts yet: add one below.')).toBeVisible();
});

test('i14: a profile list that could not be read says so with Retry, not that there are none', async ({ page, kandev }) => {
  let refuse = true;
  await page.route('**/api/v1/agent.profile.list', (route) => (refuse ? route.abort('connectionrefused') : route.continue()));
  await page.goto(`${kandev.url}/settings/profiles`);
  await expect(page.getByRole('alert').first()).toBeVisible();
  const list = page.getByRole('table', { name: 'Agent profiles' });
  await expect(list).not.toContainText('No profiles yet');
  await expect(list).not.toContainText('Reading the profiles…');

  refuse = false;
  await page.getByRole('button', { name: 'Retry' }).first().click();
  await expect(list.getByRole('cell', { name: 'Mock', exact: true })).toBeVisible();
});
