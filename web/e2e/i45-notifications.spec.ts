// Issue 45 item 24: Settings › Notifications shows the receiver's answer to Test, edits a
// channel, and its delivery log names each delivery's event and task with Retry now; the
// webhook body links to the task.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, send, test, transcript } from './kandev';

// The receiver listens on 127.0.0.1, which a server reaches only with the opt-in.
test.use({ kandevFlags: ['--allow-private-notification-targets'] });

/** A webhook receiver that answers `answer` (its status and text can be changed). */
async function receiver() {
  const bodies: string[] = [];
  const answer = { status: 200, text: 'got it, thanks' };
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      bodies.push(body);
      res.statusCode = answer.status;
      res.end(answer.text);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, bodies, answer, close: () => server.close() };
}

test('i45 24: Test shows the answer, a channel is edited, the log names event and task and retries now', async ({
  page,
  kandev,
}) => {
  const hook = await receiver();
  try {
    await page.goto(`${kandev.url}/settings/notifications`);
    const add = page.getByRole('form', { name: 'Add channel' });
    await add.getByLabel('URL').fill(hook.url);
    await add.getByRole('button', { name: 'Add channel' }).click();
    const table = page.getByRole('table', { name: 'Notification channels' });
    const row = table.locator('tbody tr[data-channel-id]');
    await expect(row).toContainText('Permission requested, Question asked');

    await row.getByRole('button', { name: 'Test' }).click();
    await expect(table.getByTestId('channel-test-result')).toHaveText(
      'Test delivered (200) · the receiver answered: got it, thanks',
    );

    // Edit: the events change; the URL (a secret) is kept when left empty.
    await row.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit channel' });
    await edit.getByLabel('Question asked').uncheck();
    await edit.getByLabel('Session failed').check();
    await edit.getByRole('button', { name: 'Save channel' }).click();
    await expect(edit).toHaveCount(0);
    await expect(row).toContainText('Permission requested, Session failed');
    const { channels } = await kandev.api('notification.channel.list', {});
    expect(channels[0].events).toEqual(['permission_requested', 'session_failed']);

    // A delivery the receiver refuses waits for its next try; Retry now sends it at once.
    hook.answer.status = 503;
    hook.answer.text = 'down for maintenance';
    const task = await kandev.createTask('Crashy', { start_agent: true });
    await page.goto(`${kandev.url}/tasks/${task.id}`);
    await expect(transcript(page).locator('[data-kind="agent"]').first()).toHaveText('echo: Crashy');
    await send(page, '#!mock\ncrash');
    await expect(page.getByTestId('needs-you')).toBeVisible();
    await page.goto(`${kandev.url}/settings/notifications`);
    const log = page.getByRole('table', { name: 'Delivery log' });
    const delivery = log.locator('tbody tr').first();
    await expect(delivery).toHaveAttribute('data-status', 'pending');
    await expect(delivery).toContainText('Session failed');
    await expect(delivery).toContainText('503 Service Unavailable');
    await expect(delivery.getByRole('link', { name: 'Crashy' })).toBeVisible();
    hook.answer.status = 200;
    await delivery.getByRole('button', { name: 'Retry now' }).click();
    await expect(delivery).toHaveAttribute('data-status', 'delivered');
    await expect(delivery.getByRole('button', { name: 'Retry now' })).toHaveCount(0);
    const last = JSON.parse(hook.bodies[hook.bodies.length - 1]);
    expect(last.notification.kind).toBe('session_failed');
    expect(last.url).toBe(`${kandev.url}/tasks/${task.id}`);

    await delivery.getByRole('link', { name: 'Crashy' }).click();
    await expect(page).toHaveURL(`${kandev.url}/tasks/${task.id}`);
  } finally {
    hook.close();
  }
});
