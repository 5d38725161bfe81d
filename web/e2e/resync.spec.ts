// Lifecycle rule 47 in the browser: when the server can no longer replay what a page missed
// (its event log was pruned past the page's last seq), it answers `resync_required`; the page
// reloads its objects by itself and goes on live.
import type { Page, WebSocketRoute } from '@playwright/test';
import { rmSync } from 'node:fs';
import { expect, send, startKandev, test, transcript } from './kandev';

/** Whether the server still replays `topic` after `since` (false: it says resync_required). */
async function replayable(probe: Page, topic: string, since: number): Promise<boolean> {
  return probe.evaluate(
    ({ topic, since }) =>
      new Promise<boolean>((resolve, reject) => {
        const ws = new WebSocket(`ws://${location.host}/ws`);
        const payload = { topics: [topic], since: { [topic]: since } };
        ws.onopen = () => ws.send(JSON.stringify({ id: 'probe', type: 'request', action: 'subscribe', payload }));
        ws.onmessage = (event) => {
          const frame = JSON.parse(String(event.data));
          if (frame.type === 'resync_required' || frame.id === 'probe') {
            ws.close();
            resolve(frame.type !== 'resync_required');
          }
        };
        ws.onerror = () => reject(new Error('the probe could not connect'));
      }),
    { topic, since },
  );
}

test('l47 the page reloads by itself after resync_required', async ({ page, context }) => {
  // A log that keeps only its newest 20 events, pruned every 100 ms.
  const kandev = await startKandev('127.0.0.1:0', ['--event-max-rows', '20', '--event-prune-interval', '100ms']);
  try {
    // The page's WebSocket runs through a switch: online it reaches the server; offline the
    // page gets a socket with nothing behind it (a link that silently dropped).
    let online = true;
    let sockets = 0;
    let current: WebSocketRoute | null = null;
    await page.routeWebSocket(/\/ws$/, (ws) => {
      sockets += 1;
      current = ws;
      if (online) ws.connectToServer();
    });
    const cut = async () => {
      const before = sockets;
      await current?.close();
      await expect.poll(() => sockets).toBeGreaterThan(before); // the page reconnected
    };

    const task = await kandev.createTask('Resync', { start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    const log = transcript(page);
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Resync');
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
    const session: string = (await kandev.api('task.session.list', { task_id: task.id })).sessions[0].id;

    // Offline: the agent works meanwhile, and the log is pruned past what the page has seen.
    online = false;
    await cut();
    await kandev.api('message.add', { session_id: session, content: '#!mock\nsay while away\nstream 40 8' });
    const messages = async () => (await kandev.api('message.list', { session_id: session, limit: 1000 })).messages;
    await expect
      .poll(async () => (await kandev.api('session.get', { id: session })).session.state, { timeout: 20_000 })
      .toBe('WAITING_FOR_INPUT');
    // Streamed text is coalesced (issue 15) into a few events: 25 task updates make sure the
    // log (20 rows) is pruned past everything the page has seen.
    for (let i = 0; i < 25; i++) await kandev.api('task.update', { id: task.id, title: `Resync ${i}` });
    const prompt = (await messages()).find((m: any) => m.kind === 'user' && m.content.includes('while away'));
    const probe = await context.newPage();
    await probe.goto(`${kandev.url}/api/v1/health`);
    await expect
      .poll(() => replayable(probe, `session:${session}`, prompt.seq - 1), { timeout: 20_000 })
      .toBe(false);
    await expect(log.locator('[data-kind="agent"]').filter({ hasText: 'while away' })).toHaveCount(0);

    // Online again: the page resubscribes with its old since, is told resync_required, and
    // reloads the transcript by itself.
    online = true;
    await cut();
    await expect(log.locator('[data-kind="agent"]').filter({ hasText: 'while away' })).toHaveCount(1);
    await expect(log.locator('[data-kind="agent"]').first()).toHaveText('echo: Resync');

    // And it follows the session live again.
    await send(page, 'back again');
    await expect(log.locator('[data-kind="agent"]').last()).toHaveText('echo: back again');
    await expect(page.getByTestId('session-state')).toHaveText('WAITING_FOR_INPUT');
  } finally {
    await kandev.stop('SIGTERM');
    rmSync(kandev.home, { recursive: true, force: true });
  }
});
