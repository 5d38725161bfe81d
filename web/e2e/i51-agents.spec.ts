// Issue 51 (more agents, installed and kept current by Kandev), the web side, as the owner of a
// server without accounts: Settings › Agent profiles lists the new agents with their login
// hints; an agent's versions panel lists what a local npm registry offers (started by the test
// on 127.0.0.1: two versions of a small `@qwen-code/qwen-code`, so nothing leaves loopback),
// installs one while showing that it works, and refuses to remove a version a profile runs; a
// profile runs an installed version, and "Update to" installs a newer one and saves it. A
// registry that does not know a package says so in the panel. The panel's "Where" offers this
// machine and each SSH executor, whose build host's versions it asks for by the executor's id.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { expect, freePort, screenshot, test as base } from './kandev';

const PACKAGE = '@qwen-code/qwen-code';
const VERSIONS = ['1.0.0', '1.1.0'];

interface Registry {
  url: string;
  /** Where npm keeps its cache and user config for the test. */
  dir: string;
  /** Package names asked for (decoded). */
  asked: string[];
}

/** A tarball of the package at `version`: `package/package.json` and `package/bin.js`, the
 * `qwen` command. */
function tarball(dir: string, version: string): Buffer {
  const root = join(dir, `src-${version}`);
  mkdirSync(join(root, 'package'), { recursive: true });
  const manifest = { name: PACKAGE, version, bin: { qwen: 'bin.js' } };
  writeFileSync(join(root, 'package', 'package.json'), JSON.stringify(manifest));
  writeFileSync(join(root, 'package', 'bin.js'), `#!/usr/bin/env node\nconsole.log('qwen ${version}');\n`, { mode: 0o755 });
  const file = join(dir, `${version}.tgz`);
  execFileSync('tar', ['czf', file, '-C', root, 'package']);
  return readFileSync(file);
}

/** A tiny npm registry on 127.0.0.1 serving `PACKAGE` at `VERSIONS` (the last is `latest`);
 * anything else is 404. */
async function startRegistry(): Promise<Registry & { close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'kandev-e2e-npm-'));
  const tarballs = new Map(VERSIONS.map((v) => [v, tarball(dir, v)]));
  const asked: string[] = [];
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const tgz = /^\/t\/(.+)\.tgz$/.exec(path);
    const body = tgz ? tarballs.get(tgz[1] ?? '') : undefined;
    if (body) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
      res.end(body);
      return;
    }
    const name = decodeURIComponent(path.slice(1));
    asked.push(name);
    if (name !== PACKAGE) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'Not found' }));
      return;
    }
    const { port } = server.address() as AddressInfo;
    const versions = Object.fromEntries(
      [...tarballs].map(([version, data]) => [
        version,
        {
          name: PACKAGE,
          version,
          bin: { qwen: 'bin.js' },
          dist: {
            tarball: `http://127.0.0.1:${port}/t/${version}.tgz`,
            integrity: `sha512-${createHash('sha512').update(data).digest('base64')}`,
          },
        },
      ]),
    );
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ name: PACKAGE, 'dist-tags': { latest: VERSIONS.at(-1) }, versions }));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    dir,
    asked,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const test = base.extend<{ registry: Registry }>({
  registry: async ({}, use) => {
    const registry = await startRegistry();
    await use(registry);
    await registry.close();
  },
  // The server's npm asks only the test's registry, with a cache and a user config of its own
  // (no ~/.npmrc, no proxy).
  kandevEnv: async ({ registry }, use) => {
    const userconfig = join(registry.dir, 'npmrc');
    writeFileSync(userconfig, '');
    await use({
      npm_config_registry: registry.url,
      npm_config_cache: join(registry.dir, 'cache'),
      npm_config_userconfig: userconfig,
      npm_config_proxy: '',
      npm_config_https_proxy: '',
      npm_config_noproxy: '127.0.0.1',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
    });
  },
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

test('i51 agents: login hints, versions from a registry, install, a profile runs a version and updates it', async ({ page, kandev, registry }) => {
  test.setTimeout(180_000);
  // An SSH executor nothing listens for (its versions panel is asked there, and the answer is
  // ssh's refusal); its identity file must exist, nothing connects with it.
  const closed = await freePort();
  const identity = join(kandev.home, 'id_test');
  writeFileSync(identity, 'not a key\n');
  const ssh = { host: '127.0.0.1', port: closed, user: 'build', identity_file: identity, known_hosts: join(kandev.home, 'known_hosts'), remote_home: '/home/build/.kandev' };
  const { executor: build1 } = await kandev.api('executor.create', { name: 'build1', kind: 'ssh', ssh });
  await kandev.api('executor.create', { name: 'here', kind: 'local' });
  await page.goto(`${kandev.url}/settings/profiles`);
  const kinds = page.getByRole('table', { name: 'Agents on this machine' });

  // The new agents, by title, each with how to log in.
  const copilot = kinds.locator('tr[data-kind="copilot"]');
  await expect(copilot).toContainText('GitHub Copilot CLI');
  await expect(copilot.getByTestId('kind-login')).toHaveText("run copilot login, or set COPILOT_GITHUB_TOKEN in the profile's env");
  await expect(copilot.getByTestId('kind-login').locator('code')).toHaveText('copilot login');
  const auggie = kinds.locator('tr[data-kind="auggie"]');
  await expect(auggie).toContainText('Auggie');
  await expect(auggie.getByTestId('kind-login')).toHaveText("run auggie login, or set AUGMENT_SESSION_AUTH (what auggie token print prints) in the profile's env");
  await expect(kinds.locator('tr[data-kind="qwen"]')).toContainText('Qwen Code');
  await expect(kinds.locator('tr[data-kind="kilo"]')).toContainText('Kilo Code');
  // Built in and custom agents are not installed by Kandev: no versions to show.
  await expect(kinds.locator('tr[data-kind="mock"]').getByRole('button', { name: 'Versions…' })).toHaveCount(0);

  // Qwen Code's versions: none installed, the registry's two offered, latest first.
  const qwen = kinds.locator('tr[data-kind="qwen"]');
  await expect(qwen.getByTestId('kind-installed-versions')).toHaveText('none');
  await qwen.getByRole('button', { name: 'Versions…' }).click();
  const panel = page.getByRole('region', { name: 'Qwen Code versions' });
  await expect(panel).toContainText(PACKAGE);
  await expect(panel).toContainText('None yet');
  const pick = panel.getByLabel('Version to install');
  await expect(pick.locator('option')).toHaveText(['1.1.0 (latest)', '1.0.0']);
  await expect(pick).toHaveValue('1.1.0');
  expect(registry.asked).toContain(PACKAGE);
  await expect(panel).toContainText('Installed by Kandev on this machine');

  // Where: this machine (which local and container executors run) or the SSH executor's build
  // host, whose versions are asked with its id; a local executor is no choice of its own.
  const where = panel.getByLabel('Where');
  await expect(where.locator('option')).toHaveText(['This machine (local and container executors)', 'build1 (SSH, build@127.0.0.1)']);
  await expect(where).toHaveValue('');
  const asked = page.waitForRequest((r) => r.url().endsWith('/api/v1/agent.versions'));
  await where.selectOption({ label: 'build1 (SSH, build@127.0.0.1)' });
  expect((await asked).postDataJSON()).toEqual({ kind: 'qwen', executor_id: build1.id });
  await expect(panel.getByRole('alert')).toContainText('cannot reach the SSH executor build1');
  await expect(pick).toHaveCount(0);
  await where.selectOption('');
  await expect(pick).toHaveValue('1.1.0');
  await expect(panel).toContainText('None yet');

  // Install 1.0.0: while npm works the panel says so and Install is disabled.
  await pick.selectOption('1.0.0');
  const release = await hold(page, 'agent.install');
  await panel.getByRole('button', { name: 'Install' }).click();
  const progress = panel.getByRole('status');
  await expect(progress).toContainText('Installing Qwen Code 1.0.0 with npm');
  await expect(panel.getByRole('button', { name: 'Install' })).toBeDisabled();
  release();
  await expect(progress).toHaveCount(0);
  await page.unroute('**/api/v1/agent.install');
  const installed = panel.getByRole('table', { name: 'Qwen Code versions installed' });
  await expect(installed.locator('tr[data-version="1.0.0"]')).toContainText('agents/qwen/1.0.0/node_modules/.bin/qwen');
  await expect(pick.locator('option')).toHaveText(['1.1.0 (latest)', '1.0.0 (installed)']);
  await expect(pick).toHaveValue('1.1.0');
  await expect(qwen.getByTestId('kind-installed-versions')).toHaveText('1.0.0');
  await expect(panel.getByRole('alert')).toHaveCount(0);
  await panel.scrollIntoViewIfNeeded();
  await screenshot(page, 'i51-agent-versions');

  // A profile runs it: chosen in the form, shown in the list once saved.
  await page.getByRole('button', { name: 'Add profile' }).click();
  const form = page.getByRole('form', { name: 'New profile' });
  await form.getByLabel('Name').fill('Qwen pinned');
  await form.getByLabel('Agent').selectOption('qwen');
  const version = form.getByLabel(/^Version/);
  await expect(version.locator('option')).toHaveText(['The command on PATH', '1.0.0 (installed by Kandev)']);
  await version.selectOption('1.0.0');
  // A command of the profile's own runs instead: the version cannot be chosen with one.
  await form.getByLabel(/^Command/).fill('qwen --acp');
  await expect(version).toBeDisabled();
  await form.getByLabel(/^Command/).fill('');
  await expect(version).toBeEnabled();
  await expect(version).toHaveValue('1.0.0');
  await form.getByRole('button', { name: 'Save profile' }).click();
  const row = page.getByRole('table', { name: 'Agent profiles' }).getByRole('row', { name: /Qwen pinned/ });
  await expect(row.getByTestId('profile-agent-version')).toHaveText('1.0.0');
  await expect(row).toContainText('Qwen Code');
  const saved = (await kandev.api('agent.profile.list', {})).profiles.find((p: { name: string }) => p.name === 'Qwen pinned');
  expect(saved.agent_version).toBe('1.0.0');

  // The panel names the profile that runs 1.0.0, and refuses to remove it, saying why.
  await panel.getByRole('button', { name: 'Close' }).click();
  await qwen.getByRole('button', { name: 'Versions…' }).click();
  await expect(installed.locator('tr[data-version="1.0.0"]')).toContainText('Qwen pinned');
  await installed.locator('tr[data-version="1.0.0"]').getByRole('button', { name: 'Remove' }).click();
  await expect(panel.getByRole('alert')).toContainText('run by the profile(s) Qwen pinned');
  await expect(installed.locator('tr[data-version="1.0.0"]')).toBeVisible();

  // Edit: the registry's 1.1.0 is newer; "Update to 1.1.0" installs it and saves it.
  await row.getByRole('button', { name: 'Edit' }).click();
  const edit = page.getByRole('form', { name: 'Edit profile' });
  await expect(edit.getByLabel(/^Version/)).toHaveValue('1.0.0');
  await expect(edit.getByRole('button', { name: 'Update to 1.1.0' })).toBeVisible();
  await screenshot(page, 'i51-profile-version');
  await edit.getByRole('button', { name: 'Update to 1.1.0' }).click();
  await expect(row.getByTestId('profile-agent-version')).toHaveText('1.1.0', { timeout: 90_000 });
  await expect(edit.getByLabel(/^Version/)).toHaveValue('1.1.0');
  await expect(edit.getByRole('button', { name: /Update to/ })).toHaveCount(0);
  await expect(qwen.getByTestId('kind-installed-versions')).toHaveText('1.1.0, 1.0.0');
  await edit.getByRole('button', { name: 'Cancel' }).click();

  // 1.0.0 is free now: removed from the panel.
  await panel.getByRole('button', { name: 'Close' }).click();
  await qwen.getByRole('button', { name: 'Versions…' }).click();
  await expect(installed.locator('tr[data-version="1.1.0"]')).toContainText('Qwen pinned');
  await installed.locator('tr[data-version="1.0.0"]').getByRole('button', { name: 'Remove' }).click();
  await expect(installed.locator('tr[data-version="1.0.0"]')).toHaveCount(0);
  await expect(qwen.getByTestId('kind-installed-versions')).toHaveText('1.1.0');

  // A package the registry does not know: the panel says the registry could not be asked.
  await kinds.locator('tr[data-kind="kilo"]').getByRole('button', { name: 'Versions…' }).click();
  const kilo = page.getByRole('region', { name: 'Kilo Code versions' });
  await expect(kilo.getByTestId('registry-error')).toContainText('The registry could not be asked for the versions');
  await expect(kilo).toContainText('None yet');
  expect(registry.asked).toContain('@kilocode/cli');

  // On a phone the agents and the versions panel fit the screen's width.
  await kilo.getByRole('button', { name: 'Close' }).click();
  await qwen.getByRole('button', { name: 'Versions…' }).click();
  await expect(installed.locator('tr[data-version="1.1.0"]')).toBeVisible();
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(panel.getByRole('button', { name: 'Install' })).toBeVisible();
  await panel.scrollIntoViewIfNeeded();
  await screenshot(page, 'i51-agent-versions-phone');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  expect(overflow).toBeLessThanOrEqual(0);
});
