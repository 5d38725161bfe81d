// A server restart during a session: the page notices, reconnects by itself on the same
// address, catches up from its last seq without duplicates, and the session goes on.
import { rmSync } from 'node:fs';
import { expect, freePort, openBoard, send, startKandev, test, transcript } from './kandev';

test('the page recovers by itself when the server restarts mid-turn', async ({ page, context }) => {
  const port = await freePort();
  // Without a runner: the restart interrupts the turn (with the default local runner the turn
  // would go on, crates/kandev/tests/readopt.rs).
  const kandev = await startKandev(`127.0.0.1:${port}`, ['--runner', 'none']);
  try {
    const task = await kandev.createTask('Survive a restart', { start_agent: true });
    const board = await context.newPage();
    await openBoard(board, kandev);
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    const log = transcript(page);
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Survive a restart');
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');

    await send(page, '#!mock\nsay before the crash\nsleep 30000\nsay never');
    await expect(log.locator('[data-kind="agent"]').nth(1)).toHaveText('before the crash');
    await expect(page.getByTestId('session-state')).toHaveText('RUNNING');

    await kandev.stop('SIGKILL');
    await expect(page.getByTestId('connection')).toHaveText(/Reconnecting/);
    await kandev.start(); // same port, same home
    expect(kandev.url).toBe(`http://127.0.0.1:${port}`);
    await expect(page.getByTestId('connection')).toHaveText('Live', { timeout: 20_000 });

    // reconciled: the interrupted turn is over, nothing is stuck "running"
    await expect(page.getByTestId('session-state')).not.toHaveText(/RUNNING|STARTING/, { timeout: 20_000 });
    await send(page, 'after the restart');
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: after the restart', { timeout: 30_000 });
    // no duplicates from the replay
    await expect(log.locator('[data-kind="agent"]').filter({ hasText: 'before the crash' })).toHaveCount(1);
    await expect(log.locator('[data-kind="user"]').filter({ hasText: 'after the restart' })).toHaveCount(1);
    await expect(log.locator('[data-kind="agent"]').filter({ hasText: 'never' })).toHaveCount(0);

    // the board in the other tab is live again too
    await kandev.createTask('Created after the restart');
    await expect(board.locator('.card', { hasText: 'Created after the restart' })).toBeVisible();
    await expect(board.locator('.card', { hasText: 'Survive a restart' })).toHaveCount(1);
  } finally {
    await kandev.stop('SIGTERM');
    rmSync(kandev.home, { recursive: true, force: true });
  }
});
