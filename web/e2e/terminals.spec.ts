// Issue 19, acceptance 4: the Terminal tab of the task page — a shell in the task's worktree
// in xterm.js (type, see the output, resize), and a dev server's log and preview link.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { expect, removeRepo, screenshot, test, type Kandev } from './kandev';

const DEV_SCRIPT = 'echo "serving on $PORT"; exec python3 -m http.server "$PORT" --bind 127.0.0.1';

test('i19 a4: a terminal in the task page runs commands and resizes; the dev server shows its log and link', async ({
  page,
  kandev,
}) => {
  const repo = await taskWithWorktree(kandev, page, 'Try the terminal', DEV_SCRIPT);
  try {
    await page.getByRole('tab', { name: 'Terminal', exact: true }).click();
    await page.getByRole('button', { name: '+ Terminal' }).click();
    const terminal = page.getByTestId('terminal');
    await expect(terminal).toBeVisible();
    await terminal.click();
    await page.keyboard.type('echo kandev-ok');
    await page.keyboard.press('Enter');
    // The command line shows `echo kandev-ok`; its output is `kandev-ok` on a line of its own.
    await expect(terminal.locator('.xterm-rows > div').filter({ hasText: /^kandev-ok\s*$/ })).toHaveCount(1);

    // Resize: the page gets narrower, the terminal fits it, and the shell is told.
    const before = Number(await terminal.getAttribute('data-cols'));
    await page.setViewportSize({ width: 760, height: 700 });
    await expect(terminal).not.toHaveAttribute('data-cols', String(before));
    const cols = Number(await terminal.getAttribute('data-cols'));
    const rows = Number(await terminal.getAttribute('data-rows'));
    expect(cols).toBeLessThan(before);
    await terminal.click();
    await page.keyboard.type('stty size');
    await page.keyboard.press('Enter');
    await expect(terminal.locator('.xterm-rows')).toContainText(`${rows} ${cols}`);

    // The dev server: its link and its log.
    await page.getByRole('button', { name: 'Start dev server' }).click();
    const server = page.getByTestId('dev-server');
    await expect(server).toBeVisible();
    // Issue 45 item 18: one at a time, and the log fits its column.
    await expect(page.getByRole('button', { name: 'Start dev server' })).toBeDisabled();
    const log = server.getByTestId('dev-server-log');
    const [box, column] = [await log.boundingBox(), await page.getByRole('region', { name: 'Dev servers' }).boundingBox()];
    expect(box!.x + box!.width).toBeLessThanOrEqual(column!.x + column!.width + 1);
    const port = await server.getAttribute('data-port');
    await expect(server.getByRole('link', { name: /Open preview/ })).toHaveAttribute('href', `http://localhost:${port}/`);
    await expect(server.getByTestId('dev-server-log').locator('.xterm-rows')).toContainText(`serving on ${port}`);
    // The link's server answers (once python has bound the port).
    await expect
      .poll(() => fetch(`http://127.0.0.1:${port}/index.html`).then((r) => r.text(), () => ''))
      .toBe('preview ok\n');

    await screenshot(page, 'i19-terminal-tab');

    // After a reload the terminal is still there, with its earlier output replayed.
    // (the address keeps the tab).
    await page.reload();
    await expect(page.getByTestId('terminal').locator('.xterm-rows')).toContainText('kandev-ok');
    await page.getByRole('button', { name: 'Close terminal 1' }).click();
    await expect(page.getByTestId('terminal')).toHaveCount(0);
    await page.getByRole('button', { name: 'Stop' }).click();
    await expect(page.getByTestId('dev-server')).toHaveCount(0);
  } finally {
    removeRepo(repo);
  }
});

// Tests of a file run side by side: this one's dev server gets ports of its own, so another
// test's dev server cannot take the port it asks for after the restart.
test.describe(() => {
  test.use({ kandevFlags: ['--dev-server-ports', '41900-41999'] });

  test('i45 13: a terminal and a dev server go on across a kill -9 of the server, their output replayed', async ({
    page,
    kandev,
  }) => {
    const repo = await taskWithWorktree(kandev, page, 'Keep my terminal', DEV_SCRIPT);
    try {
      await page.getByRole('tab', { name: 'Terminal', exact: true }).click();
      await page.getByRole('button', { name: '+ Terminal' }).click();
      const terminal = page.getByTestId('terminal');
      await terminal.click();
      // A shell variable lives only in that shell: seeing it again proves the same shell runs.
      await page.keyboard.type('KEPT=$((6*7)); echo "before-$KEPT"');
      await page.keyboard.press('Enter');
      await expect(terminal.locator('.xterm-rows > div').filter({ hasText: /^before-42\s*$/ })).toHaveCount(1);
      await page.getByRole('button', { name: 'Start dev server' }).click();
      const port = await page.getByTestId('dev-server').getAttribute('data-port');
      expect(Number(port)).toBeGreaterThanOrEqual(41900); // its own range
      await expect
        .poll(() => fetch(`http://127.0.0.1:${port}/index.html`).then((r) => r.text(), () => ''))
        .toBe('preview ok\n');

      await kandev.restart('SIGKILL');
      // A fresh page (nothing kept in the browser): the same terminal, with the output from
      // before the restart that the runner kept, then live again.
      await page.reload();
      const rows = page.getByTestId('terminal').locator('.xterm-rows');
      await expect(rows).toContainText('before-42', { timeout: 15_000 });
      await page.getByTestId('terminal').click();
      await page.keyboard.type('echo "after-$KEPT"');
      await page.keyboard.press('Enter');
      await expect(rows.locator('> div').filter({ hasText: /^after-42\s*$/ })).toHaveCount(1);
      await expect(rows.locator('> div').filter({ hasText: /^before-42\s*$/ })).toHaveCount(1);
      // The dev server still serves on its port, its log kept, and Stop still stops it.
      const server = page.getByTestId('dev-server');
      await expect(server).toHaveAttribute('data-port', port!);
      await expect(server.getByTestId('dev-server-log').locator('.xterm-rows')).toContainText(`serving on ${port}`);
      expect(await fetch(`http://127.0.0.1:${port}/index.html`).then((r) => r.text())).toBe('preview ok\n');
      await page.getByRole('button', { name: 'Stop' }).click();
      await expect(page.getByTestId('dev-server')).toHaveCount(0);
      await expect
        .poll(() => fetch(`http://127.0.0.1:${port}/index.html`).then(() => 'up', () => 'down'))
        .toBe('down');
      await page.getByRole('button', { name: 'Close terminal 1' }).click();
      await expect(page.getByTestId('terminal')).toHaveCount(0);
      expect((await kandev.api('terminal.list', { task_id: await taskId(page) })).terminals).toEqual([]);
    } finally {
      removeRepo(repo);
    }
  });
});

/** The id of the task the page shows. */
async function taskId(page: Page): Promise<string> {
  return new URL(page.url()).pathname.split('/')[2]!;
}

/** A repository and a started task on it (a started session makes the task's worktree). */
async function taskWithWorktree(kandev: Kandev, page: Page, title: string, devScript?: string) {
  const repo = mkdtempSync(join(tmpdir(), 'kandev-e2e-term-'));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Kandev Test', '-c', 'user.email=test@kandev.invalid', ...args], { cwd: repo });
  git('init', '-q', '-b', 'main');
  writeFileSync(join(repo, 'index.html'), 'preview ok\n');
  git('add', '.');
  git('commit', '-q', '-m', 'initial');
  const { workspaceId } = await kandev.board();
  const { repository } = await kandev.api('repository.create', {
    workspace_id: workspaceId,
    local_path: repo,
    ...(devScript ? { dev_script: devScript } : {}),
  });
  const task = await kandev.createTask(title, { repository_ids: [repository.id], start_agent: true });
  await page.goto(`${kandev.url}/tasks/${task.id}`);
  await expect(page.getByRole('log', { name: 'Conversation' }).locator('[data-kind="agent"]').first()).toBeVisible();
  return repo;
}

test('i19 a4: keys typed before the terminal is attached reach the shell once it is', async ({ page, kandev }) => {
  const repo = await taskWithWorktree(kandev, page, 'Type early');
  try {
    await page.getByRole('tab', { name: 'Terminal', exact: true }).click();
    // The terminal's own connection is held back until the keys are typed: what a slow
    // network or a busy server does to the first keystrokes after "+ Terminal".
    let release!: () => void;
    const typed = new Promise<void>((resolve) => (release = resolve));
    await page.routeWebSocket(/\/ws$/, async (ws) => {
      await typed;
      ws.connectToServer();
    });
    await page.getByRole('button', { name: '+ Terminal' }).click();
    const terminal = page.getByTestId('terminal');
    await expect(terminal).toBeVisible();
    await terminal.click();
    await page.keyboard.type('echo typed-early');
    await page.keyboard.press('Enter');
    release();
    // The command's output: a line ending in `typed-early` that is not the typed command (it
    // may follow the prompt on its line when the keys arrived before the shell's prompt).
    await expect(terminal.locator('.xterm-rows > div').filter({ hasText: /^(?!.*echo).*typed-early\s*$/ })).toHaveCount(1);
  } finally {
    removeRepo(repo);
  }
});
